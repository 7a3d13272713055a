package csi

import (
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bindery-dev/bindery/internal/pki"
)

// TestAPIStatus: each refusal of the API server becomes the gRPC code the
// kubelet retries or reports, with a message that says what to do.
func TestAPIStatus(t *testing.T) {
	t.Parallel()
	pod := podInfo{namespace: "shop", name: "web-1", serviceAccount: "web"}
	for _, tc := range []struct {
		code int
		body string
		want codes.Code
		msg  []string
	}{
		{403, `{"kind":"Status","message":"servicebindings.servicecatalog.k8s.io \"orders\" is forbidden: User \"system:serviceaccount:shop:web\" cannot get resource \"servicebindings/credentials\""}`,
			codes.PermissionDenied, []string{"service account shop/web may not get servicebindings/credentials", `"orders"`, "servicebinding-credentials-reader", "cannot get resource"}},
		{401, `{"kind":"Status","message":"Unauthorized"}`, codes.Unauthenticated, []string{"tokenRequests", "--credentials-audience"}},
		{404, `{"kind":"Status","message":"not found"}`, codes.NotFound, []string{"no ServiceBinding shop/orders"}},
		{409, `{"kind":"Status","message":"not Ready"}`, codes.Unavailable, []string{"not Ready"}},
		{422, `{"kind":"Status","message":"addKeysFrom"}`, codes.FailedPrecondition, []string{"addKeysFrom"}},
		{500, `garbage`, codes.Unavailable, []string{"answered 500", "Internal Server Error"}},
	} {
		err := apiStatus(tc.code, []byte(tc.body), pod, "orders")
		if status.Code(err) != tc.want {
			t.Errorf("%d: code %v, want %v", tc.code, status.Code(err), tc.want)
		}
		for _, m := range tc.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%d: message lacks %q: %v", tc.code, m, err)
			}
		}
	}
}

// TestCABundleLater: the client starts without its CA file, refuses to
// talk until the file is there (naming it), then trusts the server; a
// server its CA did not sign is refused.
func TestCABundleLater(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ServiceBindingCredentials","metadata":{"name":"orders"},"data":{"password":"cHc="}}`))
	}))
	defer srv.Close()
	// A server whose certificate another CA signed (httptest's servers
	// all share one certificate).
	otherCA, err := pki.NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := otherCA.Issue(pki.Spec{CommonName: "other", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.Server})
	if err != nil {
		t.Fatal(err)
	}
	other := serveTLS(t, cert, http.NotFoundHandler())
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	c, err := newAPIClient(srv.URL, caFile)
	if err != nil {
		t.Fatal(err)
	}
	pod := podInfo{namespace: "shop", name: "web-1"}
	_, err = c.credentials(t.Context(), pod, "orders", token{value: "tok"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), caFile) {
		t.Fatalf("without the CA file: %v", err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := c.credentials(t.Context(), pod, "orders", token{value: "tok"})
	if err != nil || string(got.Data["password"]) != "pw" {
		t.Fatalf("with the CA file: %+v, %v", got, err)
	}
	o, err := newAPIClient(other.URL, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.credentials(t.Context(), pod, "orders", token{value: "tok"}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a server the CA did not sign: %v", err)
	}
}

// serveTLS starts a server that presents cert, stopped at the test's end.
func serveTLS(t *testing.T, cert *pki.KeyPair, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Cert.Raw}, PrivateKey: cert.Key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestServerNameVerified: the server's certificate must name the host of
// --csi-apiserver, an IP address included, or the Pod's token is not sent.
// For an IP address Go's TLS client sends no server name, and the
// certificate used to be checked against that empty name, which
// crypto/x509 takes as "any name": any certificate of the CA, a Service's
// of another tenant say, received the Pod's token.
func TestServerNameVerified(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("bindery", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, tc := range []struct {
		name string
		spec pki.Spec
		host string // the URL's host in place of 127.0.0.1; empty: the address
		ok   bool
	}{
		{"IP host, certificate for that IP", pki.Spec{CommonName: "api", IPAddresses: loopback}, "", true},
		{"IP host, certificate for a DNS name only", pki.Spec{CommonName: "other", DNSNames: []string{"other.example"}}, "", false},
		{"IP host, certificate for another IP", pki.Spec{CommonName: "other", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 2)}}, "", false},
		{"DNS host, certificate for that name", pki.Spec{CommonName: "api", DNSNames: []string{"localhost"}}, "localhost", true},
		{"DNS host, certificate for another name", pki.Spec{CommonName: "other", DNSNames: []string{"other.example"}, IPAddresses: loopback}, "localhost", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.spec.Usage = pki.Server
			cert, err := ca.Issue(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			var sent atomic.Value // the Authorization header the server received
			srv := serveTLS(t, cert, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sent.Store(r.Header.Get("Authorization"))
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"kind":"ServiceBindingCredentials","metadata":{"name":"orders"},"data":{"password":"cHc="}}`))
			}))
			base := srv.URL
			if tc.host != "" {
				base = strings.Replace(base, "127.0.0.1", tc.host, 1)
			}
			c, err := newAPIClient(base, caFile)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.credentials(t.Context(), podInfo{namespace: "shop", name: "web-1"}, "orders", token{value: "pod-token"})
			switch {
			case tc.ok && err != nil:
				t.Errorf("%s refused: %v", base, err)
			case !tc.ok && err == nil:
				t.Errorf("%s accepted a certificate for %v %v; it received %q", base, tc.spec.DNSNames, tc.spec.IPAddresses, sent.Load())
			case !tc.ok && !strings.Contains(err.Error(), "certificate"):
				t.Errorf("%s: refused for another reason than its certificate: %v", base, err)
			}
		})
	}
}

// TestLatestBadSuccessor: a successor that is no ServiceBinding name is
// not followed (its name goes into the request's path); the credentials
// read so far stay.
func TestLatestBadSuccessor(t *testing.T) {
	t.Parallel()
	var paths []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ServiceBindingCredentials","metadata":{"name":"orders"},"successor":"../../other/servicebindings/x","data":{"password":"cHc="}}`))
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := newAPIClient(srv.URL, caFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.latest(t.Context(), podInfo{namespace: "shop", name: "web-1"}, "orders", token{value: "tok"})
	if got == nil || got.Name != "orders" || err == nil || !strings.Contains(err.Error(), "successor") {
		t.Errorf("latest: %+v, %v; want orders' credentials and an error naming the successor", got, err)
	}
	if len(paths) != 1 {
		t.Errorf("requests %q, want the one of orders", paths)
	}
}
