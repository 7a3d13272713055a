package cni

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The plugin reads one Pod's annotations from the kube-apiserver, and only
// when the runtime did not pass them. It does so with the standard library
// rather than client-go: the runtime starts the plugin for every Pod, and
// client-go's packages alone took about 2.5 ms of each start (measured with
// GODEBUG=inittrace=1), half the plugin's latency budget. What it reads of a
// kubeconfig is below; anything it cannot honour is refused by name.

// kubeconfigFile is the part of a kubeconfig the plugin understands.
type kubeconfigFile struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Clusters []struct {
		Name    string            `json:"name"`
		Cluster kubeconfigCluster `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string         `json:"name"`
		User kubeconfigUser `json:"user"`
	} `json:"users"`
}

type kubeconfigCluster struct {
	Server                   string `json:"server"`
	CertificateAuthority     string `json:"certificate-authority"`
	CertificateAuthorityData []byte `json:"certificate-authority-data"`
	InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
	TLSServerName            string `json:"tls-server-name"`
	ProxyURL                 string `json:"proxy-url"`
}

type kubeconfigUser struct {
	Token                 string          `json:"token"`
	TokenFile             string          `json:"tokenFile"`
	ClientCertificate     string          `json:"client-certificate"`
	ClientCertificateData []byte          `json:"client-certificate-data"`
	ClientKey             string          `json:"client-key"`
	ClientKeyData         []byte          `json:"client-key-data"`
	Username              string          `json:"username"`
	Exec                  json.RawMessage `json:"exec"`
	AuthProvider          json.RawMessage `json:"auth-provider"`
	Impersonate           string          `json:"as"`
}

// apiClient reads from one kube-apiserver as one user.
type apiClient struct {
	server *url.URL
	token  string
	http   *http.Client
}

// loadKubeconfig reads the current context of the kubeconfig at path.
// Relative file names in it are relative to the file, as kubectl has them.
// It reads, and stops at the first problem of, in this order: the current
// context, its cluster (server and CA), its user (token or client
// certificate), the cluster's proxy.
func loadKubeconfig(path string) (*apiClient, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kc kubeconfigFile
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	files := kubeconfigDir(filepath.Dir(path))
	cur, cl, err := kc.currentCluster()
	if err != nil {
		return nil, err
	}
	server, tlsConfig, err := clusterTLS(cur.Cluster, cl, files)
	if err != nil {
		return nil, err
	}
	c := &apiClient{server: server}
	if cur.User != "" {
		u, err := kc.user(cur.User)
		if err != nil {
			return nil, err
		}
		if c.token, err = userToken(cur.User, u, files); err != nil {
			return nil, err
		}
		if tlsConfig.Certificates, err = userCertificate(cur.User, u, files); err != nil {
			return nil, err
		}
	}
	proxy := http.ProxyFromEnvironment
	if cl.ProxyURL != "" {
		u, err := url.Parse(cl.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: proxy-url: %w", cur.Cluster, err)
		}
		proxy = http.ProxyURL(u)
	}
	c.http = &http.Client{Timeout: apiTimeout, Transport: &http.Transport{Proxy: proxy, TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
	return c, nil
}

// kubeconfigContext is what a kubeconfig's context names.
type kubeconfigContext struct {
	Name, Cluster, User string
}

// currentCluster finds the current context and the cluster it names; of
// entries with the same name the last counts.
func (kc *kubeconfigFile) currentCluster() (kubeconfigContext, *kubeconfigCluster, error) {
	if kc.CurrentContext == "" {
		return kubeconfigContext{}, nil, errors.New("current-context: not set")
	}
	ci := -1
	for i, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			ci = i
		}
	}
	if ci < 0 {
		return kubeconfigContext{}, nil, fmt.Errorf("current-context: no context named %q", kc.CurrentContext)
	}
	ctx := kubeconfigContext{Name: kc.CurrentContext, Cluster: kc.Contexts[ci].Context.Cluster, User: kc.Contexts[ci].Context.User}
	var cl *kubeconfigCluster
	for i := range kc.Clusters {
		if kc.Clusters[i].Name == ctx.Cluster {
			cl = &kc.Clusters[i].Cluster
		}
	}
	if cl == nil {
		return ctx, nil, fmt.Errorf("context %q: no cluster named %q", ctx.Name, ctx.Cluster)
	}
	return ctx, cl, nil
}

// user finds the user the current context names; of entries with the same
// name the last counts. It refuses ways of authenticating the plugin does
// not implement.
func (kc *kubeconfigFile) user(name string) (kubeconfigUser, error) {
	ui := -1
	for i, u := range kc.Users {
		if u.Name == name {
			ui = i
		}
	}
	if ui < 0 {
		return kubeconfigUser{}, fmt.Errorf("context %q: no user named %q", kc.CurrentContext, name)
	}
	u := kc.Users[ui].User
	if field := unsupported(u); field != "" {
		return u, fmt.Errorf("user %q: %s is not supported by %s: give the user a token, a tokenFile or a client certificate", name, field, PluginType)
	}
	return u, nil
}

// kubeconfigDir is the directory of a kubeconfig, which the relative file
// names in it are relative to.
type kubeconfigDir string

// dataOrFile returns data when it is set, else the content of the named
// file; nothing when neither is.
func (dir kubeconfigDir) dataOrFile(data []byte, name string) ([]byte, error) {
	if len(data) > 0 || name == "" {
		return data, nil
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(string(dir), name)
	}
	return os.ReadFile(name)
}

// clusterTLS checks the cluster's server URL and builds the TLS
// configuration that trusts its CA.
func clusterTLS(name string, cl *kubeconfigCluster, files kubeconfigDir) (*url.URL, *tls.Config, error) {
	server, err := url.Parse(cl.Server)
	if err != nil || (server.Scheme != "https" && server.Scheme != "http") || server.Host == "" {
		return nil, nil, fmt.Errorf("cluster %q: server %q is not an http(s) URL", name, cl.Server)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cl.TLSServerName, InsecureSkipVerify: cl.InsecureSkipTLSVerify} //nolint:gosec // only when the kubeconfig asks for it
	ca, err := files.dataOrFile(cl.CertificateAuthorityData, cl.CertificateAuthority)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %q: certificate-authority: %w", name, err)
	}
	if len(ca) > 0 {
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(ca) {
			return nil, nil, fmt.Errorf("cluster %q: certificate-authority: no PEM certificate", name)
		}
	}
	return server, tlsConfig, nil
}

// userToken returns the user's bearer token, inline or from its tokenFile;
// "" when it has none.
func userToken(name string, u kubeconfigUser, files kubeconfigDir) (string, error) {
	if u.Token != "" || u.TokenFile == "" {
		return u.Token, nil
	}
	tok, err := files.dataOrFile(nil, u.TokenFile)
	if err != nil {
		return "", fmt.Errorf("user %q: tokenFile: %w", name, err)
	}
	return strings.TrimSpace(string(tok)), nil
}

// userCertificate returns the user's client certificate, inline or from
// files; none when it has none.
func userCertificate(name string, u kubeconfigUser, files kubeconfigDir) ([]tls.Certificate, error) {
	certPEM, err := files.dataOrFile(u.ClientCertificateData, u.ClientCertificate)
	if err != nil {
		return nil, fmt.Errorf("user %q: client-certificate: %w", name, err)
	}
	keyPEM, err := files.dataOrFile(u.ClientKeyData, u.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("user %q: client-key: %w", name, err)
	}
	if len(certPEM) == 0 && len(keyPEM) == 0 {
		return nil, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("user %q: client certificate: %w", name, err)
	}
	return []tls.Certificate{pair}, nil
}

// unsupported names the first way of authenticating in u that the plugin
// does not implement, or returns "".
func unsupported(u kubeconfigUser) string {
	set := func(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }
	switch {
	case set(u.Exec):
		return "exec"
	case set(u.AuthProvider):
		return "auth-provider"
	case u.Username != "":
		return "username"
	case u.Impersonate != "":
		return "as"
	}
	return ""
}

// errPodNotFound means the kube-apiserver has no such Pod (yet).
var errPodNotFound = errors.New("not found")

// podAnnotations returns a Pod's annotations, asking only for its metadata.
func (c *apiClient) podAnnotations(ctx context.Context, namespace, name string) (map[string]string, error) {
	u := c.server.JoinPath("api", "v1", "namespaces", namespace, "pods", name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json")
	req.Header.Set("User-Agent", PluginType)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var status struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &status)
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%w: %s", errPodNotFound, status.Message)
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, status.Message)
	}
	var meta struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &meta); err != nil {
		return nil, fmt.Errorf("decode Pod: %w", err)
	}
	return meta.Metadata.Annotations, nil
}
