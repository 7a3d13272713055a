package kubetest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// StallingKubeconfig returns the path of a kubeconfig of user that reaches
// the cluster through a proxy, on a free loopback port, that holds every
// request stall picks until its client gives up, and passes the others on:
// kube-apiserver on the far side of a network that lost the connection, or
// waiting for etcd without end, for a process the test cannot reach into.
// Held requests are let go when the test ends.
func (c *Cluster) StallingKubeconfig(t testing.TB, user string, stall func(*http.Request) bool) string {
	t.Helper()
	target, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.CAData)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	rp.FlushInterval = -1 // watches
	release := make(chan struct{})
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stall(r) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	proxy.StartTLS()
	t.Cleanup(proxy.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for held requests

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stalling"] = &clientcmdapi.Cluster{Server: proxy.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw})}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: c.Token(user)}
	cfg.Contexts["stalling"] = &clientcmdapi.Context{Cluster: "stalling", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "stalling"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
