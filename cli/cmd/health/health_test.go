package health

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCACert checks an https server with a CA of its own: refused
// without --cacert, healthy with it.
func TestCACert(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := Run(ctx, &Options{URL: srv.URL, Timeout: 5 * time.Second}); err == nil {
		t.Error("a server of an unknown CA was found healthy")
	}
	if err := Run(ctx, &Options{URL: srv.URL, Timeout: 5 * time.Second, CACert: ca}); err != nil {
		t.Errorf("with --cacert: %v", err)
	}
	if err := Run(ctx, &Options{URL: srv.URL, Timeout: 5 * time.Second, CACert: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("a missing --cacert file was accepted")
	}
}
