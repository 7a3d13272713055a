// Package pki makes and keeps the certificates Bindery's servers and tests
// need: a CA, serving and client certificates it signs, and their PEM files.
//
// Keys are ECDSA P-256 throughout: generating one takes microseconds where
// RSA 2048 takes up to a second on a busy machine, and every consumer
// (Go's crypto/tls, kube-apiserver, kubectl) accepts them.
//
// Files are replaced atomically, a certificate only when it no longer
// fits (Ensure), so a server that watches them, such as one serving with
// k8s.io/apiserver's dynamiccertificates.NewDynamicServingContentFromFiles,
// reloads a whole new pair and never a half-written file.
package pki

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
)

// Usage says what a certificate is for: serving TLS, authenticating a
// client, or both.
type Usage int

const (
	// Server is a TLS server certificate (extended key usage serverAuth).
	Server Usage = 1 << iota
	// Client is a TLS client certificate (extended key usage clientAuth).
	Client
)

// DefaultValidity is how long a certificate issued without Spec.Validity
// is valid.
const DefaultValidity = 365 * 24 * time.Hour

// backdate is how far NotBefore lies in the past, so that a peer whose
// clock is a little behind accepts a certificate issued just now.
const backdate = time.Hour

// Spec describes a certificate to issue.
type Spec struct {
	CommonName string
	// Organization becomes the subject's O, which Kubernetes reads as the
	// client's groups.
	Organization []string
	DNSNames     []string
	IPAddresses  []net.IP
	Usage        Usage
	// Validity is how long the certificate is valid; DefaultValidity when 0.
	Validity time.Duration
}

// KeyPair is a certificate and its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA certificate, valid for validity.
func NewCA(commonName string, validity time.Duration) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	kp, err := create(tmpl, validity, nil)
	if err != nil {
		return nil, fmt.Errorf("make CA %s: %w", commonName, err)
	}
	return kp, nil
}

// Issue makes a key and a certificate for s, signed by ca.
func (ca *KeyPair) Issue(s Spec) (*KeyPair, error) {
	if s.Usage&(Server|Client) == 0 {
		return nil, fmt.Errorf("issue %s: no usage", s.CommonName)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: s.CommonName, Organization: s.Organization},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		DNSNames:    s.DNSNames,
		IPAddresses: s.IPAddresses,
		ExtKeyUsage: s.extKeyUsage(),
	}
	validity := s.Validity
	if validity == 0 {
		validity = DefaultValidity
	}
	kp, err := create(tmpl, validity, ca)
	if err != nil {
		return nil, fmt.Errorf("issue %s: %w", s.CommonName, err)
	}
	return kp, nil
}

func (s Spec) extKeyUsage() []x509.ExtKeyUsage {
	var u []x509.ExtKeyUsage
	if s.Usage&Server != 0 {
		u = append(u, x509.ExtKeyUsageServerAuth)
	}
	if s.Usage&Client != 0 {
		u = append(u, x509.ExtKeyUsageClientAuth)
	}
	return u
}

// create signs tmpl with parent or, when parent is nil, with its own key.
func create(tmpl *x509.Certificate, validity time.Duration, parent *KeyPair) (*KeyPair, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(validity)
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// NewKey makes an ECDSA P-256 private key, for a certificate or on its own
// (a service-account signing key).
func NewKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return key, nil
}

// CertPEM is the certificate, PEM-encoded.
func (kp *KeyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.Cert.Raw})
}

// KeyPEM is the private key, PEM-encoded as KeyPEM encodes it.
func (kp *KeyPair) KeyPEM() ([]byte, error) { return KeyPEM(kp.Key) }

// KeyPEM encodes key in SEC 1 form ("EC PRIVATE KEY"): the one form that
// every reader here takes, kube-apiserver's --service-account-key-file
// included, which does not read an ECDSA key in PKCS #8.
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Parse reads a PEM certificate and its PEM private key, in SEC 1 or
// PKCS #8 form (files written before SEC 1 was the only form written).
func Parse(certPEM, keyPEM []byte) (*KeyPair, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("no PEM private key")
	}
	var key *ecdsa.PrivateKey
	switch kb.Type {
	case "EC PRIVATE KEY":
		if key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
			return nil, fmt.Errorf("parse private key: %w", err)
		}
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse private key: %w", err)
		}
		var ok bool
		if key, ok = k.(*ecdsa.PrivateKey); !ok {
			return nil, fmt.Errorf("private key is a %T, not ECDSA", k)
		}
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key", kb.Type)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("the private key does not match the certificate")
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// Read reads a pair written by Write. A missing file gives an error that
// matches os.ErrNotExist.
func Read(certPath, keyPath string) (*KeyPair, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	kp, err := Parse(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certPath, keyPath, err)
	}
	return kp, nil
}

// Write stores the key (mode 0600) and then the certificate (0644), each
// replaced atomically, creating their directories.
func (kp *KeyPair) Write(certPath, keyPath string) error {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	if err := WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return WriteFile(certPath, kp.CertPEM(), 0o644)
}

// WriteFile replaces path with data atomically (a temporary file renamed
// over it), so a crash or a reader never sees half a file.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the directory of %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// LoadOrCreateCA reads the CA at certPath and keyPath, or makes one valid
// for validity and writes it there when neither file exists yet.
func LoadOrCreateCA(certPath, keyPath, commonName string, validity time.Duration) (*KeyPair, error) {
	ca, err := Read(certPath, keyPath)
	switch {
	case err == nil:
		if !ca.Cert.IsCA {
			return nil, fmt.Errorf("%s is not a CA certificate", certPath)
		}
		return ca, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read CA: %w", err)
	}
	if ca, err = NewCA(commonName, validity); err != nil {
		return nil, err
	}
	if err := ca.Write(certPath, keyPath); err != nil {
		return nil, err
	}
	return ca, nil
}

// Ensure makes sure certPath and keyPath hold a certificate for s signed
// by ca and valid for at least renewBefore more. It keeps the files that
// already do, so that clients pinning them and servers watching them see
// no change, and otherwise issues a new pair and writes it. It reports
// whether it issued one.
func (ca *KeyPair) Ensure(certPath, keyPath string, s Spec, renewBefore time.Duration) (bool, error) {
	if kp, err := Read(certPath, keyPath); err == nil && kp.fits(ca, s, renewBefore) {
		return false, nil
	}
	kp, err := ca.Issue(s)
	if err != nil {
		return false, err
	}
	if err := kp.Write(certPath, keyPath); err != nil {
		return false, err
	}
	return true, nil
}

// fits reports whether kp is a certificate for s from ca with at least
// renewBefore left. Names beyond s's are allowed: a certificate made for
// more hosts still serves these.
func (kp *KeyPair) fits(ca *KeyPair, s Spec, renewBefore time.Duration) bool {
	c := kp.Cert
	return kp.SignedBy(ca) &&
		time.Until(c.NotAfter) >= renewBefore &&
		c.Subject.CommonName == s.CommonName &&
		slices.Equal(c.Subject.Organization, s.Organization) &&
		slices.Equal(c.ExtKeyUsage, s.extKeyUsage()) &&
		kp.Covers(s.DNSNames, s.IPAddresses)
}

// SignedBy reports whether ca signed kp's certificate.
func (kp *KeyPair) SignedBy(ca *KeyPair) bool {
	return kp.Cert.CheckSignatureFrom(ca.Cert) == nil
}

// Covers reports whether the certificate names every host and IP address
// given.
func (kp *KeyPair) Covers(dnsNames []string, ips []net.IP) bool {
	for _, h := range dnsNames {
		if !slices.Contains(kp.Cert.DNSNames, h) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(kp.Cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}
