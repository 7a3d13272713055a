package apiserver

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The server's own PKI, kept in its data directory so that a restart keeps
// the identities clients trust: a CA that signs the serving certificate and
// the client certificates the server accepts, and an admin client
// certificate for the kubeconfig it writes.

// AdminUser is the identity of the kubeconfig the server writes. Every
// authenticated client is an administrator; the group is there for when
// the server runs behind kube-apiserver's authorization.
const AdminUser = "bindery-admin"

const (
	caCertFile      = "ca.crt"
	caKeyFile       = "ca.key"
	servingCertFile = "serving.crt"
	servingKeyFile  = "serving.key"
	adminCertFile   = "admin.crt"
	adminKeyFile    = "admin.key"
)

// pki is the certificates and keys of one data directory.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
}

// loadPKI reads the CA of dir, making one when there is none, and makes
// sure the serving certificate covers hosts and ips and the admin client
// certificate exists.
func loadPKI(dir string, hosts []string, ips []net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the data directory: %w", err)
	}
	p := &pki{dir: dir}
	cert, key, err := readPair(filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		tmpl := &x509.Certificate{
			Subject:               pkix.Name{CommonName: "bindery-apiserver-ca"},
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true, IsCA: true,
		}
		if cert, key, err = p.issue(tmpl, 10*365*24*time.Hour, caCertFile, caKeyFile); err != nil {
			return nil, fmt.Errorf("make the CA: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("read the CA: %w", err)
	}
	p.caCert, p.caKey = cert, key
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})

	serving, _, err := readPair(p.path(servingCertFile), p.path(servingKeyFile))
	if err != nil || !covers(serving, hosts, ips) || !p.signed(serving) || time.Until(serving.NotAfter) < 30*24*time.Hour {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: "bindery-apiserver"},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    hosts, IPAddresses: ips,
		}
		if _, _, err := p.issue(tmpl, 365*24*time.Hour, servingCertFile, servingKeyFile); err != nil {
			return nil, fmt.Errorf("make the serving certificate: %w", err)
		}
	}
	admin, _, err := readPair(p.path(adminCertFile), p.path(adminKeyFile))
	if err != nil || !p.signed(admin) || time.Until(admin.NotAfter) < 30*24*time.Hour {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{"system:masters"}},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if _, _, err := p.issue(tmpl, 365*24*time.Hour, adminCertFile, adminKeyFile); err != nil {
			return nil, fmt.Errorf("make the admin client certificate: %w", err)
		}
	}
	return p, nil
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p *pki) signed(c *x509.Certificate) bool {
	return c != nil && c.CheckSignatureFrom(p.caCert) == nil
}

func covers(c *x509.Certificate, hosts []string, ips []net.IP) bool {
	if c == nil {
		return false
	}
	for _, h := range hosts {
		if !slices.Contains(c.DNSNames, h) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// issue makes a key and a certificate from tmpl, signed by the CA (or by
// itself when there is no CA yet), and writes both.
func (p *pki) issue(tmpl *x509.Certificate, valid time.Duration, certName, keyName string) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(valid)
	parent, signer := tmpl, crypto.Signer(key)
	if p.caCert != nil {
		parent, signer = p.caCert, p.caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := writeFile(p.path(keyName), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, nil, err
	}
	if err := writeFile(p.path(certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// writeFile replaces a file atomically, so a crash leaves the old one.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s: no PEM data", certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certPath, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a signing key", keyPath)
	}
	return cert, signer, nil
}

// writeKubeconfig writes a kubeconfig that reaches server (https://HOST:PORT)
// as AdminUser, with the certificates inline so the file stands alone.
func (p *pki) writeKubeconfig(path, server string) error {
	certPEM, err := os.ReadFile(p.path(adminCertFile))
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(p.path(adminKeyFile))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bindery"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["bindery"] = &clientcmdapi.Context{Cluster: "bindery", AuthInfo: AdminUser, Namespace: "default"}
	cfg.CurrentContext = "bindery"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return writeFile(path, data, 0o600)
}
