package servicebinding_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// stallWrites holds every write of a Deployment until its request's
// context ends, while on: kube-apiserver as it is on the far side of a
// network that lost the connection, or when it waits for etcd without end.
// It counts the watches started.
type stallWrites struct {
	rt      http.RoundTripper
	on      *atomic.Bool
	watches *atomic.Int64
}

func (s stallWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" {
		s.watches.Add(1)
	}
	if s.on.Load() && req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/deployments") {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return s.rt.RoundTrip(req)
}

// TestKubeCallsBounded: a projection's update of a Deployment that
// kube-apiserver never answers gives up after the controller's Kubernetes
// timeout and is retried with the queue's backoff, instead of holding its
// reconcile and a worker for as long as the connection hangs; the
// informers' watches, on a client without that timeout, outlive it; once
// kube-apiserver answers again the binding is projected.
func TestKubeCallsBounded(t *testing.T) {
	stall, watches := &atomic.Bool{}, &atomic.Int64{}
	b := setupWith(t, admissionregistrationv1.Ignore, "", func(o *servicebinding.Options, cfg *rest.Config) {
		o.KubeTimeout = time.Second
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return stallWrites{rt: rt, on: stall, watches: watches}
		}
	})
	c, ns := b.c, b.ns
	create(t, c, secret(ns, "prod-db"), deployment(ns, "online-banking", nil, "app"))
	stall.Store(true)
	sb := binding(ns, "account-service", secretRef("prod-db"), deploymentRef("online-banking"))
	create(t, c, sb)
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		lines, _ := b.logs.since(0)
		for _, l := range lines {
			if strings.Contains(l, "update Deployment online-banking") && strings.Contains(l, "context deadline exceeded") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the stalled update of Deployment online-banking was not given up: %v", err)
	}
	// The watches are not cut by the timeout: none is started again
	// (they last minutes).
	before := watches.Load()
	time.Sleep(3 * time.Second)
	if n := watches.Load() - before; n > 0 {
		t.Errorf("%d watches started again in 3 s: the per-request timeout cuts them", n)
	}
	stall.Store(false)
	waitReady(t, c, sb, metav1.ConditionTrue, servicebinding.ReasonProjected)
}

// TestOptionsKubeRequestTimeout: --kube-request-timeout fills
// KubeTimeout (TestNumericFlagsChecked in cmd/bindery has the commands
// refuse one that is not positive).
func TestOptionsKubeRequestTimeout(t *testing.T) {
	t.Parallel()
	certDir := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certDir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{
		{"", 30 * time.Second},
		{"2s", 2 * time.Second},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
			var o servicebinding.Options
			o.AddFlags(fs)
			args := []string{"--listen", "127.0.0.1:0", "--cert-dir", certDir}
			if tc.arg != "" {
				args = append(args, "--kube-request-timeout", tc.arg)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if o.KubeTimeout != tc.want {
				t.Errorf("KubeTimeout %s, want %s", o.KubeTimeout, tc.want)
			}
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			if err := o.Validate(); err != nil {
				t.Errorf("valid options: %v", err)
			}
		})
	}
}
