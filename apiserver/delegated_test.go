package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/syncbuf"
)

// TestDelegatedOlderCluster runs the server against a kube-apiserver that
// does not serve mutating admission policies (as before Kubernetes 1.36):
// the plugin is turned off with a warning, and the server becomes ready
// (with it on, its informer would never sync and /readyz never pass).
func TestDelegatedOlderCluster(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t, kubetest.WithAPIServerFlags(
		"--runtime-config=admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false",
		// kube-apiserver's own plugin would wait for the API for ever too.
		"--disable-admission-plugins=ServiceAccount,MutatingAdmissionPolicy"))
	store := apiserver.NewTestStore(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := runServer(t, &apiserver.Options{Listener: l, DataDir: filepath.Join(t.TempDir(), "apiserver"), ClusterKubeconfig: cluster.Kubeconfig()}, store, log)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CAData)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		res, err := client.Get(srv.Server + "/readyz")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", res.Status)
		}
		return nil
	})
	if !strings.Contains(logs.String(), "plugin=MutatingAdmissionPolicy") || strings.Contains(logs.String(), "plugin=ValidatingAdmissionPolicy") {
		t.Errorf("warnings:\n%s", logs.String())
	}
}
