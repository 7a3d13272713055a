package controller_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// stallWrites holds every write of a Secret until its request's context
// ends, while on: kube-apiserver as it is on the far side of a network
// that lost the connection, or when it waits for etcd without end.
type stallWrites struct {
	rt http.RoundTripper
	on *atomic.Bool
}

func (s stallWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.on.Load() && req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/secrets") {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return s.rt.RoundTrip(req)
}

// TestKubeCallsBounded: a write of a binding's Secret that kube-apiserver
// never answers gives up after the engine's Kubernetes timeout and is
// retried with the queue's backoff, instead of holding its reconcile and a
// worker for as long as the connection hangs; once kube-apiserver answers
// again the binding is Ready.
func TestKubeCallsBounded(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	stall := &atomic.Bool{}
	cfg := cluster.Config()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return stallWrites{rt: rt, on: stall} }
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, func(o *engineOptions) { o.kube, o.workers, o.kubeTimeout = kube, 2, time.Second })
	e.registerFake()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	stall.Store(true)
	b := e.createBinding("app", "db")
	waitFor(t, 20*time.Second, "the stalled Secret write given up and retried", func() bool {
		return strings.Contains(e.logs.String(), "create Secret test/app") && strings.Contains(e.logs.String(), "context deadline exceeded")
	})
	stall.Store(false)
	e.waitBinding(b.ID, "Ready once kube-apiserver answers", bindingReady)
}

// TestKubeSecretsBounded: a read of a broker's Secret that kube-apiserver
// never answers gives up after KubeSecrets' Timeout (1 s here, well
// before the 30 s default), instead of holding the catalogue fetch or
// reconcile that needs the broker's credentials.
func TestKubeSecretsBounded(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	kubeconfig := cluster.StallingKubeconfig(t, kubetest.Admin, func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/secrets/broker-auth")
	})
	o := controller.Options{Kubeconfig: kubeconfig}
	kube, err := o.KubeClient()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = controller.KubeSecrets{Kube: kube, Timeout: time.Second}.SecretData(t.Context(), "default", "broker-auth")
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 10*time.Second {
		t.Fatalf("read of a Secret whose GET stalls: %v after %s; want the deadline within 10 s", err, took.Round(time.Second))
	}
}
