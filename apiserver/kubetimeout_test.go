package apiserver_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
)

// TestKubeCallsBounded: a write into a namespace the server's informer
// has not seen makes admission (NamespaceLifecycle) look the namespace up
// at kube-apiserver, with no deadline of k8s.io/apiserver's own. When that
// read is never answered, the write fails after the server's own bound
// (Options.KubeTimeout, 1 s here: well before the 10 s default, so the
// option is seen to reach the client) instead of holding its request, and
// its seat, for good.
func TestKubeCallsBounded(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	stall := &atomic.Bool{}
	kubeconfig := cluster.StallingKubeconfig(t, kubetest.Admin, func(r *http.Request) bool {
		return stall.Load() && r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/nowhere"
	})
	store := apiserver.NewTestStore(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := runServer(t, &apiserver.Options{Listener: l, DataDir: filepath.Join(t.TempDir(), "apiserver"), ClusterKubeconfig: kubeconfig, KubeTimeout: time.Second}, store, log)
	sc, err := versioned.NewForConfig(&rest.Config{Host: srv.Server, BearerToken: cluster.Token(kubetest.Admin), TLSClientConfig: rest.TLSClientConfig{CAData: srv.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	instance := &v1beta1.ServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "none", ClusterServicePlanExternalName: "none"}},
	}
	// Ready when admission answers for the missing namespace.
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		_, err := sc.ServicecatalogV1beta1().ServiceInstances("nowhere").Create(ctx, instance, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})

	stall.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = sc.ServicecatalogV1beta1().ServiceInstances("nowhere").Create(ctx, instance, metav1.CreateOptions{})
	if took := time.Since(start); !apierrors.IsInternalError(err) || took > 7*time.Second {
		t.Fatalf("create in a namespace whose lookup stalls: %v after %s; want the server's own error within 7 s", err, took.Round(time.Second))
	}
	t.Logf("gave up after %s: %v", time.Since(start).Round(time.Second), err)
}
