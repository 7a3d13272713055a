package apiserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bindery-dev/bindery/internal/pki"
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

// renewBefore is how long a certificate must still be valid at start for
// the server to keep it.
const renewBefore = 30 * 24 * time.Hour

// dataPKI is the certificates and keys of one data directory.
type dataPKI struct {
	dir   string
	caPEM []byte
}

// loadPKI reads the CA of dir, making one when there is none, and makes
// sure the serving certificate covers hosts and ips and the admin client
// certificate exists.
func loadPKI(dir string, hosts []string, ips []net.IP) (*dataPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the data directory: %w", err)
	}
	p := &dataPKI{dir: dir}
	ca, err := pki.LoadOrCreateCA(p.path(caCertFile), p.path(caKeyFile), "bindery-apiserver-ca", 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	p.caPEM = ca.CertPEM()
	serving := pki.Spec{CommonName: "bindery-apiserver", DNSNames: hosts, IPAddresses: ips, Usage: pki.Server}
	if _, err := ca.Ensure(p.path(servingCertFile), p.path(servingKeyFile), serving, renewBefore); err != nil {
		return nil, fmt.Errorf("make the serving certificate: %w", err)
	}
	admin := pki.Spec{CommonName: AdminUser, Organization: []string{"system:masters"}, Usage: pki.Client}
	if _, err := ca.Ensure(p.path(adminCertFile), p.path(adminKeyFile), admin, renewBefore); err != nil {
		return nil, fmt.Errorf("make the admin client certificate: %w", err)
	}
	return p, nil
}

func (p *dataPKI) path(name string) string { return filepath.Join(p.dir, name) }

// writeKubeconfig writes a kubeconfig that reaches server (https://HOST:PORT)
// as AdminUser, with the certificates inline so the file stands alone.
func (p *dataPKI) writeKubeconfig(path, server string) error {
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
	return pki.WriteFile(path, data, 0o600)
}
