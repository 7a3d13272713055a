package csi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

const (
	// fetchTimeout bounds one read of the credentials subresource.
	fetchTimeout = 10 * time.Second
	// maxBody bounds the answer: credentials are small.
	maxBody = 1 << 20
	// maxHops bounds how many rotations one refresh follows.
	maxHops = 8
)

// apiClient reads the credentials subresource of ServiceBindings straight
// from Bindery's aggregated API server (its Service, not kube-apiserver,
// which would refuse a token of Bindery's audience), each request with the
// Pod's own token: the agent holds no power to read credentials itself.
type apiClient struct {
	base *url.URL
	http *http.Client
}

// newAPIClient reaches the server at base (https://HOST:PORT), trusting the
// CA bundle in caFile, or the system's roots when it is empty. The bundle
// is read when a connection is made, not now: the agent starts (and its
// other parts serve) before the operator has put it in place, and a
// renewed CA is picked up without a restart.
func newAPIClient(base, caFile string) (*apiClient, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("API server URL %q: must be https://HOST[:PORT]", base)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		roots := &caBundle{file: caFile}
		// Verified here against the file's roots rather than by crypto/tls
		// with a fixed RootCAs, which could not follow the file. The name
		// checked is the configured host, not the connection's server
		// name: for an IP address that is empty (no SNI is sent), and
		// crypto/x509 checks no name at all then, so any certificate of
		// the CA would receive the Pod's token. The host, an IP address
		// included, must be among the certificate's names.
		host := u.Hostname()
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			pool, err := roots.pool()
			if err != nil {
				return err
			}
			opts := x509.VerifyOptions{Roots: pool, DNSName: host, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err = cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	tr.Proxy = nil // a Service of the cluster: never through a proxy
	tr.MaxIdleConnsPerHost = 8
	return &apiClient{base: u, http: &http.Client{Transport: tr, Timeout: fetchTimeout}}, nil
}

// caBundle is a CA file read again when it changes.
type caBundle struct {
	file string
	mu   sync.Mutex
	mod  time.Time
	p    *x509.CertPool
}

func (b *caBundle) pool() (*x509.CertPool, error) {
	fi, err := os.Stat(b.file)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle of Bindery's API server: %w (deploy/csi/README.md says how to put it there)", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p != nil && fi.ModTime().Equal(b.mod) {
		return b.p, nil
	}
	pem, err := os.ReadFile(b.file)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle of Bindery's API server: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the CA bundle of Bindery's API server, %s: no PEM certificate in it", b.file)
	}
	b.p, b.mod = p, fi.ModTime()
	return p, nil
}

// credentials reads one binding's credentials as the token's owner. Its
// errors are gRPC statuses whose message says what the Pod lacks: the
// kubelet shows them in the Pod's FailedMount event.
func (c *apiClient) credentials(ctx context.Context, pod podInfo, binding string, tok token) (*v1beta1.ServiceBindingCredentials, error) {
	u := *c.base
	u.Path = path.Join(u.Path, "/apis", v1beta1.GroupName, "v1beta1", "namespaces", pod.namespace, "servicebindings", binding, "credentials")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "build the request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.value)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "read the credentials of ServiceBinding %s/%s from %s: %v", pod.namespace, binding, c.base.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "read the credentials of ServiceBinding %s/%s: %v", pod.namespace, binding, err)
	}
	if len(body) > maxBody {
		return nil, status.Errorf(codes.ResourceExhausted, "the credentials of ServiceBinding %s/%s are larger than %d bytes", pod.namespace, binding, maxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, apiStatus(resp.StatusCode, body, pod, binding)
	}
	var out v1beta1.ServiceBindingCredentials
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, status.Errorf(codes.Internal, "decode the credentials of ServiceBinding %s/%s: %v", pod.namespace, binding, err)
	}
	return &out, nil
}

// apiStatus turns the API server's refusal into a gRPC status that names
// the cause: for a 403, the permission the Pod's service account lacks.
func apiStatus(code int, body []byte, pod podInfo, binding string) error {
	var st metav1.Status
	msg := http.StatusText(code)
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	who := "the Pod's service account"
	if pod.serviceAccount != "" {
		who = "service account " + pod.namespace + "/" + pod.serviceAccount
	}
	switch code {
	case http.StatusUnauthorized:
		return status.Errorf(codes.Unauthenticated, "Bindery's API server did not accept the Pod's token of its audience (%s); check the CSIDriver's tokenRequests and the server's --credentials-audience", msg)
	case http.StatusForbidden:
		return status.Errorf(codes.PermissionDenied, "%s may not get servicebindings/credentials (group %s) of %q in namespace %s: bind it to a role that grants it (Bindery's servicebinding-credentials-reader): %s",
			who, v1beta1.GroupName, binding, pod.namespace, msg)
	case http.StatusNotFound:
		return status.Errorf(codes.NotFound, "no ServiceBinding %s/%s: %s", pod.namespace, binding, msg)
	case http.StatusConflict, http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return status.Errorf(codes.Unavailable, "ServiceBinding %s/%s: %s", pod.namespace, binding, msg)
	case http.StatusUnprocessableEntity:
		return status.Errorf(codes.FailedPrecondition, "ServiceBinding %s/%s: %s", pod.namespace, binding, msg)
	}
	return status.Errorf(codes.Unavailable, "ServiceBinding %s/%s: the API server answered %d: %s", pod.namespace, binding, code, msg)
}

// latest reads the credentials of binding, following its rotations
// (ServiceBindingCredentials.successor) to the newest, each read with the
// Pod's own permission. A successor the Pod may not read, or that has
// gone, stops the walk at the last readable one, with its error.
func (c *apiClient) latest(ctx context.Context, pod podInfo, binding string, tok token) (*v1beta1.ServiceBindingCredentials, error) {
	creds, err := c.credentials(ctx, pod, binding, tok)
	if err != nil {
		return nil, err
	}
	for range maxHops {
		if creds.Successor == "" {
			return creds, nil
		}
		// Its name goes into the next request's path.
		if msgs := validation.IsDNS1123Subdomain(creds.Successor); len(msgs) > 0 {
			return creds, fmt.Errorf("the successor of %s, %q, is no ServiceBinding name: %s", creds.Name, creds.Successor, strings.Join(msgs, "; "))
		}
		next, err := c.credentials(ctx, pod, creds.Successor, tok)
		if err != nil {
			return creds, fmt.Errorf("follow the rotation of %s to %s: %w", creds.Name, creds.Successor, err)
		}
		creds = next
	}
	return creds, nil
}
