package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// TestServeAPIServerDelegated runs `bindery serve apiserver` with a
// cluster's kubeconfig (KUBECONFIG): it delegates authentication and
// authorization to that kube-apiserver, so a token the cluster knows gets
// what RBAC gives it, an unknown token 401, no token or a forged front-proxy
// header (without the front proxy's client certificate) 403; probes need
// no credentials; and no admin kubeconfig is written. It runs without
// encryption keys: it reads and writes no secret.
func TestServeAPIServerDelegated(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	dataDir := t.TempDir()
	p := start(t, []string{"DATABASE_URL=" + pgtest.New(t), "KUBECONFIG=" + cluster.Kubeconfig()},
		"serve", "apiserver", "--listen", "127.0.0.1:0", "--data-dir", dataDir)

	base := servingURL(t, p, "serving the Kubernetes API behind the cluster's aggregation layer")
	if !strings.Contains(p.stdout.String(), "behind the cluster's aggregation layer") {
		t.Errorf("stdout: %q", p.stdout.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "kubeconfig")); err == nil {
		t.Error("an admin kubeconfig was written in delegated mode")
	}

	// The server issued its certificate from its own CA.
	caPEM, err := os.ReadFile(filepath.Join(dataDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	status := func(path string, header ...string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	waitReadyz := func() {
		t.Helper()
		eventually.Succeeds(t, 90*time.Second, func(context.Context) error {
			if got := status("/readyz"); got != http.StatusOK {
				return fmt.Errorf("/readyz answered %d:\n%s", got, p.stderr.String())
			}
			return nil
		})
	}
	waitReadyz()

	const classes = "/apis/servicecatalog.k8s.io/v1beta1/clusterserviceclasses"
	for _, tc := range []struct {
		who    string
		header []string
		want   int
	}{
		{"admin (system:masters)", []string{"Authorization", "Bearer " + cluster.Token(kubetest.Admin)}, http.StatusOK},
		{"alice (no rights)", []string{"Authorization", "Bearer " + cluster.Token(kubetest.Alice)}, http.StatusForbidden},
		{"an unknown token", []string{"Authorization", "Bearer not-a-token"}, http.StatusUnauthorized},
		{"nobody", nil, http.StatusForbidden},
		{"a forged front-proxy header", []string{"X-Remote-User", kubetest.Admin, "X-Remote-Group", "system:masters"}, http.StatusForbidden},
	} {
		if got := status(classes, tc.header...); got != tc.want {
			t.Errorf("%s listing classes: %d, want %d", tc.who, got, tc.want)
		}
	}
	if err := p.interrupt(t); err != nil {
		t.Errorf("serve apiserver after Ctrl-C: %v\n%s", err, p.stderr.String())
	}

	// Given a certificate, as in deploy/bindery, it writes nothing: its
	// data directory is never made.
	unused := filepath.Join(t.TempDir(), "unused")
	p = start(t, []string{"DATABASE_URL=" + pgtest.New(t), "KUBECONFIG=" + cluster.Kubeconfig()},
		"serve", "apiserver", "--listen", "127.0.0.1:0", "--data-dir", unused,
		"--tls-cert-file", filepath.Join(dataDir, "serving.crt"), "--tls-private-key-file", filepath.Join(dataDir, "serving.key"))
	base = servingURL(t, p, "serving the Kubernetes API behind the cluster's aggregation layer")
	waitReadyz()
	if _, err := os.Stat(unused); err == nil {
		t.Error("the data directory was made though a certificate was given")
	}
	if err := p.interrupt(t); err != nil {
		t.Errorf("serve apiserver after Ctrl-C: %v\n%s", err, p.stderr.String())
	}
}

// TestServeAPIServerStandalone runs `bindery serve apiserver` with no
// cluster: it writes an admin kubeconfig with which kubectl lists the
// (empty) marketplace, and `bindery health --cacert` (docker-compose.yaml's
// health check) trusts it through the CA in its data directory.
func TestServeAPIServerStandalone(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	p := start(t, []string{"DATABASE_URL=" + pgtest.New(t)},
		"serve", "apiserver", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	url := servingURL(t, p, "serving the Kubernetes API")
	local := strings.Replace(url, "127.0.0.1", "localhost", 1)
	for _, args := range [][]string{{"health", local, "--cacert", filepath.Join(dataDir, "ca.crt")}, {"health", local}} {
		h := start(t, nil, args...)
		err := h.wait(t)
		if want := len(args) == 4; (err == nil) != want {
			t.Errorf("bindery %s: %v, want success %v\n%s", strings.Join(args, " "), err, want, h.stderr.String())
		}
	}
	kubeconfig := filepath.Join(dataDir, "kubeconfig")
	if !strings.Contains(p.stdout.String(), "kubeconfig: "+kubeconfig) {
		t.Errorf("stdout: %q", p.stdout.String())
	}
	out, err := kubetest.Kubectl(t.Context(), t.TempDir(), kubeconfig, nil, "get", "clusterserviceclasses", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("kubectl get clusterserviceclasses: %v\n%s", err, out)
	}
	if err := p.interrupt(t); err != nil {
		t.Errorf("serve apiserver after Ctrl-C: %v\n%s", err, p.stderr.String())
	}
}

// servingURL waits until the process logs msg with the url it serves at,
// and returns that url.
func servingURL(t testing.TB, p *proc, msg string) string {
	t.Helper()
	re := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `".* url=(\S+)`)
	var url string
	eventually.Succeeds(t, 60*time.Second, func(context.Context) error {
		p.failIfExited(t)
		m := re.FindStringSubmatch(p.stderr.String())
		if m == nil {
			return fmt.Errorf("bindery never logged %q:\n%s", msg, p.stderr.String())
		}
		url = m[1]
		return nil
	})
	return url
}

// TestServeAPIServerConfigErrors: settings that cannot work are refused at
// start, with the flag named.
func TestServeAPIServerConfigErrors(t *testing.T) {
	t.Parallel()
	db := "DATABASE_URL=postgres://x@127.0.0.1:1/x"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		says string
	}{
		{"several kubeconfigs", []string{db, "KUBECONFIG=/a" + string(os.PathListSeparator) + "/b"}, nil, "name one file"},
		{"certificate standalone", []string{db}, []string{"--tls-cert-file", "c.crt", "--tls-private-key-file", "c.key"}, "only behind a cluster"},
		{"certificate without key", []string{db, "KUBECONFIG=/a"}, []string{"--tls-cert-file", "c.crt"}, "give both or neither"},
		{"no snapshot time", []string{db}, []string{"--snapshot-limit", "0s"}, "--snapshot-limit: must be positive"},
		{"negative watch bound", []string{db}, []string{"--max-watches-per-user", "-1"}, "--max-watches-per-user: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, tc.env, append([]string{"serve", "apiserver", "--listen", "127.0.0.1:0"}, tc.args...)...)
			if err := p.wait(t); err == nil {
				t.Fatal("started with settings that cannot work")
			}
			if !strings.Contains(p.stderr.String(), tc.says) {
				t.Errorf("error does not mention %q:\n%s", tc.says, p.stderr.String())
			}
		})
	}
}
