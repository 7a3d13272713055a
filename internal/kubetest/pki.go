package kubetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Keys are ECDSA P-256 throughout, including the service-account signing key
// (ES256 tokens): generating one takes microseconds where RSA 2048 takes up to
// a second on a busy machine, and kube-apiserver accepts both.

// files are the paths of what writeFiles wrote for kube-apiserver.
type files struct {
	serving          keyPair
	clientCA         string
	frontProxyCA     string
	frontProxyClient keyPair
	serviceAccount   string
	tokens           string
}

type keyPair struct{ cert, key string }

// writeFiles creates the cluster's certificates, keys, token file and
// kubeconfigs under c.dir, and sets c.CAData, c.CAFile and c.tokens.
func (c *Cluster) writeFiles() (files, error) {
	var f files
	dir := filepath.Join(c.dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("create pki directory: %w", err)
	}
	path := func(name string) string { return filepath.Join(dir, name) }

	ca, err := newCA("kubetest-ca")
	if err != nil {
		return f, err
	}
	c.CAData = ca.certPEM
	c.CAFile = path("ca.crt")
	f.clientCA = c.CAFile
	if err := writeFile(c.CAFile, ca.certPEM); err != nil {
		return f, err
	}
	serving, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return f, err
	}
	if f.serving, err = serving.write(path("apiserver")); err != nil {
		return f, err
	}

	frontProxyCA, err := newCA("kubetest-front-proxy-ca")
	if err != nil {
		return f, err
	}
	f.frontProxyCA = path("front-proxy-ca.crt")
	if err := writeFile(f.frontProxyCA, frontProxyCA.certPEM); err != nil {
		return f, err
	}
	frontProxyClient, err := frontProxyCA.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "front-proxy-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return f, err
	}
	if f.frontProxyClient, err = frontProxyClient.write(path("front-proxy-client")); err != nil {
		return f, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, fmt.Errorf("generate service-account key: %w", err)
	}
	saPEM, err := keyPEM(saKey)
	if err != nil {
		return f, err
	}
	f.serviceAccount = path("service-account.key")
	if err := writeFile(f.serviceAccount, saPEM); err != nil {
		return f, err
	}

	f.tokens = path("tokens.csv")
	if err := writeFile(f.tokens, c.tokenFile()); err != nil {
		return f, err
	}
	for user := range c.users {
		c.kubeconfigs[user] = filepath.Join(c.dir, "kubeconfig-"+user)
		if err := c.writeKubeconfig(user, c.kubeconfigs[user]); err != nil {
			return f, err
		}
	}
	return f, nil
}

// tokenFile gives every user a random token and returns the contents of
// kube-apiserver's --token-auth-file: token,user,uid[,"group1,group2"].
func (c *Cluster) tokenFile() []byte {
	names := make([]string, 0, len(c.users))
	for name := range c.users {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		tok := make([]byte, 32)
		_, _ = rand.Read(tok) // never fails (crypto/rand)
		c.tokens[name] = hex.EncodeToString(tok)
		fmt.Fprintf(&b, "%s,%s,%s", c.tokens[name], name, name)
		if groups := c.users[name].Groups; len(groups) > 0 {
			fmt.Fprintf(&b, `,"%s"`, strings.Join(groups, ","))
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// issued is a certificate with its key, both PEM-encoded.
type issued struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

func newCA(name string) (*issued, error) {
	return sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
}

// issue signs tmpl with the CA ca.
func (ca *issued) issue(tmpl *x509.Certificate) (*issued, error) {
	tmpl.KeyUsage |= x509.KeyUsageDigitalSignature
	return sign(tmpl, ca)
}

// sign creates a key and a certificate for tmpl, signed by parent or, when
// parent is nil, by itself.
func sign(tmpl *x509.Certificate, parent *issued) (*issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("create certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &issued{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  kp,
	}, nil
}

// write stores the certificate and key as base.crt and base.key.
func (i *issued) write(base string) (keyPair, error) {
	kp := keyPair{cert: base + ".crt", key: base + ".key"}
	if err := writeFile(kp.cert, i.certPEM); err != nil {
		return kp, err
	}
	return kp, writeFile(kp.key, i.keyPEM)
}

// keyPEM encodes key in SEC 1 form ("EC PRIVATE KEY"), the one form that
// kube-apiserver's --service-account-key-file parser reads for ECDSA.
func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
