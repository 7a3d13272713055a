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
func loadKubeconfig(path string) (*apiClient, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kc kubeconfigFile
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if kc.CurrentContext == "" {
		return nil, errors.New("current-context: not set")
	}
	ci := -1
	for i, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			ci = i
		}
	}
	if ci < 0 {
		return nil, fmt.Errorf("current-context: no context named %q", kc.CurrentContext)
	}
	ctx := kc.Contexts[ci].Context
	var cl *kubeconfigCluster
	for i := range kc.Clusters {
		if kc.Clusters[i].Name == ctx.Cluster {
			cl = &kc.Clusters[i].Cluster
		}
	}
	if cl == nil {
		return nil, fmt.Errorf("context %q: no cluster named %q", kc.CurrentContext, ctx.Cluster)
	}
	server, err := url.Parse(cl.Server)
	if err != nil || (server.Scheme != "https" && server.Scheme != "http") || server.Host == "" {
		return nil, fmt.Errorf("cluster %q: server %q is not an http(s) URL", ctx.Cluster, cl.Server)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cl.TLSServerName, InsecureSkipVerify: cl.InsecureSkipTLSVerify} //nolint:gosec // only when the kubeconfig asks for it
	ca := cl.CertificateAuthorityData
	if len(ca) == 0 && cl.CertificateAuthority != "" {
		if ca, err = os.ReadFile(rel(cl.CertificateAuthority)); err != nil {
			return nil, fmt.Errorf("cluster %q: certificate-authority: %w", ctx.Cluster, err)
		}
	}
	if len(ca) > 0 {
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("cluster %q: certificate-authority: no PEM certificate", ctx.Cluster)
		}
	}
	c := &apiClient{server: server}
	if ctx.User != "" {
		ui := -1
		for i, u := range kc.Users {
			if u.Name == ctx.User {
				ui = i
			}
		}
		if ui < 0 {
			return nil, fmt.Errorf("context %q: no user named %q", kc.CurrentContext, ctx.User)
		}
		u := kc.Users[ui].User
		if field := unsupported(u); field != "" {
			return nil, fmt.Errorf("user %q: %s is not supported by %s: give the user a token, a tokenFile or a client certificate", ctx.User, field, PluginType)
		}
		c.token = u.Token
		if c.token == "" && u.TokenFile != "" {
			tok, err := os.ReadFile(rel(u.TokenFile))
			if err != nil {
				return nil, fmt.Errorf("user %q: tokenFile: %w", ctx.User, err)
			}
			c.token = strings.TrimSpace(string(tok))
		}
		certPEM, keyPEM := u.ClientCertificateData, u.ClientKeyData
		if len(certPEM) == 0 && u.ClientCertificate != "" {
			if certPEM, err = os.ReadFile(rel(u.ClientCertificate)); err != nil {
				return nil, fmt.Errorf("user %q: client-certificate: %w", ctx.User, err)
			}
		}
		if len(keyPEM) == 0 && u.ClientKey != "" {
			if keyPEM, err = os.ReadFile(rel(u.ClientKey)); err != nil {
				return nil, fmt.Errorf("user %q: client-key: %w", ctx.User, err)
			}
		}
		if len(certPEM) > 0 || len(keyPEM) > 0 {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return nil, fmt.Errorf("user %q: client certificate: %w", ctx.User, err)
			}
			tlsConfig.Certificates = []tls.Certificate{pair}
		}
	}
	proxy := http.ProxyFromEnvironment
	if cl.ProxyURL != "" {
		u, err := url.Parse(cl.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: proxy-url: %w", ctx.Cluster, err)
		}
		proxy = http.ProxyURL(u)
	}
	c.http = &http.Client{Timeout: apiTimeout, Transport: &http.Transport{Proxy: proxy, TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
	return c, nil
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
