package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// TestClusterCallsBounded: a request of `bindery up`'s installer or of
// `bindery down` that kube-apiserver never answers (held by a proxy until
// the client gives up) ends the command with an error after the bound
// --kube-request-timeout sets, instead of holding it for good. The bound is
// 2 s here and the command must end well within the 30 s default, so the
// flag is seen to reach the client.
func TestClusterCallsBounded(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	for _, tc := range []struct {
		name  string
		args  []string
		env   []string
		stall func(*http.Request) bool
		want  string
	}{{
		name: "up installs the CRDs",
		args: []string{"up", "--data-dir", filepath.Join(t.TempDir(), "data"),
			"--broker-listen", "127.0.0.1:0", "--catalog-listen", "127.0.0.1:0", "--controller-listen", "127.0.0.1:0",
			"--apiserver-listen", "127.0.0.1:0", "--webhook-listen", "127.0.0.1:0", "--kube-request-timeout", "2s"},
		env: []string{"DATABASE_URL=" + pgtest.New(t)},
		stall: func(r *http.Request) bool {
			return r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/customresourcedefinitions/")
		},
		want: "install the servicebinding.io webhook",
	}, {
		name:  "down lists the Secrets",
		args:  []string{"down", "--kube-request-timeout", "2s"},
		stall: func(r *http.Request) bool { return r.Method == http.MethodGet && r.URL.Path == "/api/v1/secrets" },
		want:  "list the Secrets of bindings",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kubeconfig := cluster.StallingKubeconfig(t, kubetest.Admin, tc.stall)
			began := time.Now()
			p := start(t, append([]string{"KUBECONFIG=" + kubeconfig}, tc.env...), tc.args...)
			if err := p.wait(t); err == nil {
				t.Fatalf("bindery %s succeeded with a request never answered:\n%s", tc.args[0], p.stderr.String())
			}
			if took := time.Since(began); took > 25*time.Second {
				t.Errorf("bindery %s ended after %s: --kube-request-timeout 2s did not bound the request", tc.args[0], took.Round(time.Second))
			}
			got := p.stderr.String()
			timedOut := strings.Contains(got, "deadline exceeded") || strings.Contains(got, "Client.Timeout exceeded")
			if !strings.Contains(got, tc.want) || !timedOut {
				t.Errorf("stderr lacks %q and the timeout:\n%s", tc.want, got)
			}
		})
	}
}
