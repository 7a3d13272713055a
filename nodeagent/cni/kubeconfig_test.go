package cni

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned returns a PEM certificate and key for a client.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:n1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// fakeAPI is a TLS server answering Pod reads as kube-apiserver does, for
// the Pods in pods; it records the last request.
func fakeAPI(t *testing.T, pods map[string]string) (*httptest.Server, *http.Request) {
	t.Helper()
	last := &http.Request{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*last = *r.Clone(r.Context())
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") == "Bearer forbidden" {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","message":"pods \"p\" is forbidden: User \"x\" cannot get resource \"pods\""}`))
			return
		}
		body, ok := pods[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","message":"pods \"p\" not found"}`))
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, last
}

func TestKubeconfig(t *testing.T) {
	t.Parallel()
	srv, last := fakeAPI(t, map[string]string{
		"/api/v1/namespaces/default/pods/p": `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"p","annotations":{"bindery.dev/egress":"[]","x":"y"}}}`,
	})
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	certPEM, keyPEM := selfSigned(t)
	dir := t.TempDir()
	for name, data := range map[string][]byte{"ca.crt": caPEM, "token": []byte("from-file\n"), "client.crt": certPEM, "client.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	kubeconfig := func(cluster, user string) string {
		return "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n" +
			"clusters:\n- name: k\n  cluster:\n    server: " + srv.URL + "\n" + cluster +
			"users:\n- name: u\n  user:\n" + user
	}
	tests := []struct {
		name      string
		config    string
		wantToken string
		wantCert  bool
		wantErr   string
	}{
		{name: "token and a CA file relative to the kubeconfig",
			config: kubeconfig("    certificate-authority: ca.crt\n", "    token: tok\n"), wantToken: "tok"},
		{name: "token file and CA data",
			config: kubeconfig("    certificate-authority-data: "+b64(caPEM)+"\n", "    tokenFile: token\n"), wantToken: "from-file"},
		{name: "client certificate files",
			config: kubeconfig("    certificate-authority: ca.crt\n", "    client-certificate: client.crt\n    client-key: client.key\n"), wantCert: true},
		{name: "client certificate data",
			config: kubeconfig("    certificate-authority: ca.crt\n", "    client-certificate-data: "+b64(certPEM)+"\n    client-key-data: "+b64(keyPEM)+"\n"), wantCert: true},
		{name: "exec is refused by name",
			config:  kubeconfig("    certificate-authority: ca.crt\n", "    exec: {command: get-token, apiVersion: client.authentication.k8s.io/v1}\n"),
			wantErr: `user "u": exec is not supported`},
		{name: "a CA file that is missing",
			config:  kubeconfig("    certificate-authority: missing.crt\n", "    token: tok\n"),
			wantErr: `cluster "k": certificate-authority:`},
		{name: "a context naming no cluster",
			config:  strings.Replace(kubeconfig("", "    token: tok\n"), "cluster: k,", "cluster: other,", 1),
			wantErr: `context "c": no cluster named "other"`},
		{name: "no current context",
			config:  strings.Replace(kubeconfig("", "    token: tok\n"), "current-context: c\n", "", 1),
			wantErr: "current-context: not set"},
		{name: "a server that is no URL",
			config:  strings.Replace(kubeconfig("", "    token: tok\n"), srv.URL, "api.example:6443", 1),
			wantErr: `cluster "k": server "api.example:6443" is not an http(s) URL`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "kubeconfig-"+string(rune('a'+i)))
			if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := loadKubeconfig(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.podAnnotations(t.Context(), "default", "p")
			if err != nil {
				t.Fatal(err)
			}
			if got["bindery.dev/egress"] != "[]" || got["x"] != "y" {
				t.Errorf("annotations %v", got)
			}
			if h := last.Header.Get("Authorization"); (tt.wantToken == "" && h != "") || (tt.wantToken != "" && h != "Bearer "+tt.wantToken) {
				t.Errorf("Authorization %q, want the token %q", h, tt.wantToken)
			}
			if !strings.HasPrefix(last.Header.Get("Accept"), "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1") {
				t.Errorf("Accept %q: the Pod's metadata only is asked for", last.Header.Get("Accept"))
			}
			if presented := len(last.TLS.PeerCertificates) > 0; presented != tt.wantCert {
				t.Errorf("client certificate presented: %v, want %v", presented, tt.wantCert)
			}
		})
	}

	// Answers other than 200.
	path := filepath.Join(dir, "kubeconfig-errors")
	if err := os.WriteFile(path, []byte(kubeconfig("    certificate-authority: ca.crt\n", "    token: tok\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadKubeconfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.podAnnotations(t.Context(), "default", "missing"); !errors.Is(err, errPodNotFound) {
		t.Errorf("missing Pod: %v, want errPodNotFound", err)
	}
	c.token = "forbidden"
	if _, err := c.podAnnotations(t.Context(), "default", "p"); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "cannot get resource") {
		t.Errorf("forbidden: %v, want the status and the server's message", err)
	}
	// A server whose certificate the kubeconfig's CA did not sign.
	if err := os.WriteFile(path, []byte(kubeconfig("    certificate-authority: client.crt\n", "    token: tok\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = loadKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.podAnnotations(t.Context(), "default", "p"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted server: %v, want a certificate error", err)
	}
}
