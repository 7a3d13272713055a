package kubetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bindery-dev/bindery/internal/pki"
)

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

// validity is how long the cluster's certificates are valid: longer than
// any test runs.
const validity = 24 * time.Hour

// writeFiles creates the cluster's certificates, keys, token file and
// kubeconfigs under c.dir, and sets c.CAData, c.CAFile and c.tokens.
func (c *Cluster) writeFiles() (files, error) {
	var f files
	dir := filepath.Join(c.dir, "pki")
	path := func(name string) string { return filepath.Join(dir, name) }
	write := func(kp *pki.KeyPair, base string) (keyPair, error) {
		p := keyPair{cert: path(base + ".crt"), key: path(base + ".key")}
		return p, kp.Write(p.cert, p.key)
	}

	ca, err := pki.NewCA("kubetest-ca", validity)
	if err != nil {
		return f, err
	}
	c.CAData = ca.CertPEM()
	c.CAFile = path("ca.crt")
	f.clientCA = c.CAFile
	if err := pki.WriteFile(c.CAFile, c.CAData, 0o600); err != nil {
		return f, err
	}
	serving, err := ca.Issue(pki.Spec{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		// The node's address too: Pods given WithInClusterAPI reach the
		// API server there.
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1), net.ParseIP(NodeIP)},
		Usage:       pki.Server,
		Validity:    validity,
	})
	if err != nil {
		return f, err
	}
	if f.serving, err = write(serving, "apiserver"); err != nil {
		return f, err
	}

	frontProxyCA, err := pki.NewCA("kubetest-front-proxy-ca", validity)
	if err != nil {
		return f, err
	}
	f.frontProxyCA = path("front-proxy-ca.crt")
	if err := pki.WriteFile(f.frontProxyCA, frontProxyCA.CertPEM(), 0o600); err != nil {
		return f, err
	}
	frontProxyClient, err := frontProxyCA.Issue(pki.Spec{CommonName: "front-proxy-client", Usage: pki.Client, Validity: validity})
	if err != nil {
		return f, err
	}
	if f.frontProxyClient, err = write(frontProxyClient, "front-proxy-client"); err != nil {
		return f, err
	}

	// The service-account signing key signs ES256 tokens.
	saKey, err := pki.NewKey()
	if err != nil {
		return f, fmt.Errorf("service-account key: %w", err)
	}
	saPEM, err := pki.KeyPEM(saKey)
	if err != nil {
		return f, err
	}
	f.serviceAccount = path("service-account.key")
	if err := pki.WriteFile(f.serviceAccount, saPEM, 0o600); err != nil {
		return f, err
	}

	f.tokens = path("tokens.csv")
	if err := pki.WriteFile(f.tokens, c.tokenFile(), 0o600); err != nil {
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
