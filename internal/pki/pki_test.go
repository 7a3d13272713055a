package pki_test

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/pki"
)

func newCA(t *testing.T) *pki.KeyPair {
	t.Helper()
	ca, err := pki.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestIssue checks each kind of certificate against crypto/x509's own
// verification, for the use it was made for and against the others.
func TestIssue(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	other := newCA(t)
	webhookNames := []string{"bindery-webhook.bindery-system.svc", "bindery-webhook.bindery-system.svc.cluster.local"}
	tests := []struct {
		name     string
		spec     pki.Spec
		verifyAs x509.ExtKeyUsage
		host     string
		roots    *pki.KeyPair
		wantErr  string // "" when the certificate must verify
	}{
		{name: "serving, DNS name", spec: pki.Spec{CommonName: "webhook", DNSNames: webhookNames, Usage: pki.Server},
			verifyAs: x509.ExtKeyUsageServerAuth, host: webhookNames[0], roots: ca},
		{name: "serving, IP address", spec: pki.Spec{CommonName: "apiserver", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.Server},
			verifyAs: x509.ExtKeyUsageServerAuth, host: "127.0.0.1", roots: ca},
		{name: "serving, other host", spec: pki.Spec{CommonName: "webhook", DNSNames: webhookNames, Usage: pki.Server},
			verifyAs: x509.ExtKeyUsageServerAuth, host: "evil.example", roots: ca, wantErr: "not evil.example"},
		{name: "serving used as client", spec: pki.Spec{CommonName: "webhook", DNSNames: webhookNames, Usage: pki.Server},
			verifyAs: x509.ExtKeyUsageClientAuth, roots: ca, wantErr: "incompatible key usage"},
		{name: "client", spec: pki.Spec{CommonName: "admin", Organization: []string{"system:masters"}, Usage: pki.Client},
			verifyAs: x509.ExtKeyUsageClientAuth, roots: ca},
		{name: "client used as server", spec: pki.Spec{CommonName: "admin", Usage: pki.Client},
			verifyAs: x509.ExtKeyUsageServerAuth, roots: ca, wantErr: "incompatible key usage"},
		{name: "both uses", spec: pki.Spec{CommonName: "peer", DNSNames: []string{"peer"}, Usage: pki.Server | pki.Client},
			verifyAs: x509.ExtKeyUsageClientAuth, roots: ca},
		{name: "another CA", spec: pki.Spec{CommonName: "admin", Usage: pki.Client},
			verifyAs: x509.ExtKeyUsageClientAuth, roots: other, wantErr: "unknown authority"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kp, err := ca.Issue(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(tc.roots.Cert)
			_, err = kp.Cert.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.verifyAs}})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("verify: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("verify: %v, want an error saying %q", err, tc.wantErr)
			}
			if got := kp.Cert.Subject; got.CommonName != tc.spec.CommonName || strings.Join(got.Organization, ",") != strings.Join(tc.spec.Organization, ",") {
				t.Errorf("subject %v", got)
			}
			if left := time.Until(kp.Cert.NotAfter); left < pki.DefaultValidity-time.Minute || left > pki.DefaultValidity {
				t.Errorf("valid for %s more, want %s", left, pki.DefaultValidity)
			}
			if kp.Cert.IsCA {
				t.Error("an issued certificate is a CA")
			}
		})
	}
	if _, err := ca.Issue(pki.Spec{CommonName: "nothing"}); err == nil {
		t.Error("a certificate without a usage was issued")
	}
}

// TestTLS: a webhook's serving certificate and a client certificate from
// one CA complete a mutual TLS handshake over loopback.
func TestTLS(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	const host = "bindery-webhook.bindery-system.svc"
	serving, err := ca.Issue(pki.Spec{CommonName: "webhook", DNSNames: []string{host}, Usage: pki.Server})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(pki.Spec{CommonName: "kube-apiserver", Usage: pki.Client})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	tlsPair := func(kp *pki.KeyPair) tls.Certificate {
		t.Helper()
		keyPEM, err := kp.KeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(kp.CertPEM(), keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{tlsPair(serving)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			peer <- err.Error()
			return
		}
		defer conn.Close()
		tc := conn.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			peer <- err.Error()
			return
		}
		peer <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
		_, _ = io.WriteString(conn, "ok")
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: host, Certificates: []tls.Certificate{tlsPair(client)}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got, _ := io.ReadAll(conn); string(got) != "ok" {
		t.Errorf("read %q", got)
	}
	if got := <-peer; got != "kube-apiserver" {
		t.Errorf("the server saw client %q", got)
	}
}

// TestParse reads both key encodings and refuses what is not a matching
// pair.
func TestParse(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	kp, err := ca.Issue(pki.Spec{CommonName: "x", Usage: pki.Client})
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := kp.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	pkcs8DER, err := x509.MarshalPKCS8PrivateKey(kp.Key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8DER})
	caKey, _ := ca.KeyPEM()
	tests := []struct {
		name    string
		cert    []byte
		key     []byte
		wantErr string
	}{
		{name: "SEC 1 key", cert: kp.CertPEM(), key: sec1},
		{name: "PKCS 8 key", cert: kp.CertPEM(), key: pkcs8},
		{name: "another key", cert: kp.CertPEM(), key: caKey, wantErr: "does not match"},
		{name: "key as certificate", cert: sec1, key: sec1, wantErr: "no PEM certificate"},
		{name: "certificate as key", cert: kp.CertPEM(), key: kp.CertPEM(), wantErr: "not a private key"},
		{name: "not PEM", cert: kp.CertPEM(), key: []byte("garbage"), wantErr: "no PEM private key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := pki.Parse(tc.cert, tc.key)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Cert.Equal(kp.Cert) || !got.Key.Equal(kp.Key) {
				t.Error("parsed pair differs")
			}
		})
	}
}

// TestEnsure: the files are kept while they fit what is asked, and
// replaced when they do not.
func TestEnsure(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	other := newCA(t)
	base := pki.Spec{CommonName: "webhook", DNSNames: []string{"a.svc", "b.svc"}, IPAddresses: []net.IP{net.IPv6loopback}, Usage: pki.Server}
	tests := []struct {
		name        string
		before      func(certPath, keyPath string) // the files found
		spec        pki.Spec
		renewBefore time.Duration
		wantIssued  bool
	}{
		{name: "no files", before: func(string, string) {}, spec: base, wantIssued: true},
		{name: "fits", spec: base, wantIssued: false},
		{name: "fewer names asked", spec: pki.Spec{CommonName: "webhook", DNSNames: []string{"b.svc"}, Usage: pki.Server}, wantIssued: false},
		{name: "a new name", spec: pki.Spec{CommonName: "webhook", DNSNames: []string{"a.svc", "b.svc", "c.svc"}, IPAddresses: base.IPAddresses, Usage: pki.Server}, wantIssued: true},
		{name: "a new IP address", spec: pki.Spec{CommonName: "webhook", DNSNames: base.DNSNames, IPAddresses: []net.IP{net.IPv4(10, 0, 0, 1)}, Usage: pki.Server}, wantIssued: true},
		{name: "another usage", spec: pki.Spec{CommonName: "webhook", DNSNames: base.DNSNames, IPAddresses: base.IPAddresses, Usage: pki.Client}, wantIssued: true},
		{name: "another subject", spec: pki.Spec{CommonName: "webhook", Organization: []string{"system:masters"}, DNSNames: base.DNSNames, IPAddresses: base.IPAddresses, Usage: pki.Server}, wantIssued: true},
		{name: "expiring", spec: base, renewBefore: 2 * pki.DefaultValidity, wantIssued: true},
		{name: "signed by another CA", before: func(c, k string) { write(t, other, base, c, k) }, spec: base, wantIssued: true},
		{name: "corrupt", before: func(c, k string) {
			if err := os.WriteFile(c, []byte("not a certificate"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, spec: base, wantIssued: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
			if tc.before == nil {
				write(t, ca, base, certPath, keyPath)
			} else {
				tc.before(certPath, keyPath)
			}
			old, _ := os.ReadFile(certPath)
			issued, err := ca.Ensure(certPath, keyPath, tc.spec, tc.renewBefore)
			if err != nil {
				t.Fatal(err)
			}
			if issued != tc.wantIssued {
				t.Errorf("issued = %v, want %v", issued, tc.wantIssued)
			}
			now, _ := os.ReadFile(certPath)
			if changed := string(now) != string(old); changed != tc.wantIssued {
				t.Errorf("certificate file changed: %v, want %v", changed, tc.wantIssued)
			}
			kp, err := pki.Read(certPath, keyPath)
			if err != nil {
				t.Fatal(err)
			}
			if !kp.SignedBy(ca) || !kp.Covers(tc.spec.DNSNames, tc.spec.IPAddresses) {
				t.Errorf("after Ensure: %v %v %v", kp.Cert.Issuer, kp.Cert.DNSNames, kp.Cert.IPAddresses)
			}
			if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("key file: %v %v", fi.Mode(), err)
			}
		})
	}
}

func write(t *testing.T, ca *pki.KeyPair, s pki.Spec, certPath, keyPath string) {
	t.Helper()
	kp, err := ca.Issue(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := kp.Write(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
}

// TestLoadOrCreateCA: the first call makes the CA, the next ones read it;
// a certificate that is not a CA is refused.
func TestLoadOrCreateCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "sub", "ca.crt"), filepath.Join(dir, "sub", "ca.key")
	first, err := pki.LoadOrCreateCA(certPath, keyPath, "test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	again, err := pki.LoadOrCreateCA(certPath, keyPath, "test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cert.Equal(first.Cert) || !again.Key.Equal(first.Key) {
		t.Error("a second load made a new CA")
	}
	if !again.Cert.IsCA || again.Key.Public().(*ecdsa.PublicKey).Curve.Params().Name != "P-256" {
		t.Errorf("CA: IsCA %v", again.Cert.IsCA)
	}
	write(t, first, pki.Spec{CommonName: "leaf", Usage: pki.Client}, certPath, keyPath)
	if _, err := pki.LoadOrCreateCA(certPath, keyPath, "test-ca", time.Hour); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("a leaf as CA: %v", err)
	}
	if err := os.WriteFile(keyPath, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadOrCreateCA(certPath, keyPath, "test-ca", time.Hour); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("a corrupt CA key was replaced or ignored: %v", err)
	}
}
