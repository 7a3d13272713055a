// Package osb is Bindery's OSB client: sigs.k8s.io/go-open-service-broker-client/v2
// for the types and verbs it knows (up to OSB 2.14), and a thin layer of our
// own for what it lacks — contexts, OSB 2.15–2.17 fields (binding_rotatable,
// allow_context_updates, maintenance_info, endpoints, predecessor_binding_id),
// Retry-After, and the catalogue kept whole with every field the broker sent.
package osb

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// APIVersion is the OSB version Bindery speaks.
const APIVersion = "2.17"

// Bounds on what a broker sends, so that a careless or hostile broker
// cannot make Bindery hold or store more than these (docs/engine.md,
// Bounds). The catalogue has its own (MaxCatalog).
const (
	// MaxAnswer bounds the body of an answer to a provision, update,
	// deprovision, unbind or poll, and of any error. A success answer past
	// it is malformed; an error answer past it keeps its status only.
	MaxAnswer = 64 << 10
	// MaxBindingAnswer bounds the body of a binding (bind, fetch binding),
	// which carries credentials.
	MaxBindingAnswer = 256 << 10
	// MaxCredentials bounds a binding's credentials, as JSON (a certificate
	// chain and its key fit many times over); larger ones make the answer
	// malformed.
	MaxCredentials = 64 << 10
	// MaxDescription bounds a broker's description or error message: a
	// longer one is cut on a character boundary and ends with
	// pgtext.ClipMark. OSB recommends strings of at most 255 characters.
	MaxDescription = 1 << 10
	// MaxErrorCode bounds an OSB error code ("ConcurrencyError"); longer
	// ones are cut too.
	MaxErrorCode = 128
	// MaxOperation is OSB's bound on an operation value, in characters:
	// a longer one makes the answer malformed (it cannot be cut and still
	// name the operation).
	MaxOperation = 10_000
	// MaxDashboardURL bounds a dashboard_url, in bytes: a longer one is
	// ignored (a cut URL would point elsewhere).
	MaxDashboardURL = 4 << 10
	// MaxEndpoints, MaxEndpointHost, MaxEndpointPorts and
	// MaxEndpointField (a port or range, "6000-6010", and a protocol)
	// bound a binding's endpoints: more, or longer, make the answer
	// malformed.
	MaxEndpoints     = 100
	MaxEndpointHost  = 253
	MaxEndpointPorts = 100
	MaxEndpointField = 16
	// MaxHeader bounds an answer's header (its status line and fields),
	// over HTTP/1.1 and HTTP/2 alike: past it the answer is not read, and
	// the request fails as a broker's failure. OSB answers need a few
	// fields (Retry-After, Content-Type); net/http's default is 10 MiB.
	MaxHeader = 32 << 10
)

// EndpointProblem says what puts an endpoint past the bounds, or "".
func EndpointProblem(host string, ports []string, protocol string) string {
	if len(host) > MaxEndpointHost || len(ports) > MaxEndpointPorts || len(protocol) > MaxEndpointField {
		return fmt.Sprintf("a host of at most %d bytes, at most %d ports and a protocol of at most %d bytes", MaxEndpointHost, MaxEndpointPorts, MaxEndpointField)
	}
	for _, p := range ports {
		if len(p) > MaxEndpointField {
			return fmt.Sprintf("ports of at most %d bytes", MaxEndpointField)
		}
	}
	return ""
}

// Config says how to reach a broker.
type Config struct {
	URL string
	// Basic or Bearer authentication, at most one.
	Username, Password string
	Token              string
	// CABundle is PEM; InsecureSkipTLSVerify turns verification off.
	CABundle              []byte
	InsecureSkipTLSVerify bool
	// Timeout bounds every request (default 60 s, what platforms use).
	Timeout time.Duration
	// Egress decides which addresses may be connected to. nil refuses only
	// DefaultDeny's ranges; servers always pass the policy of their
	// --broker-egress-* flags, which refuse loopback unless told.
	Egress *Egress
}

// Client talks to one broker.
type Client struct {
	cfg  Config
	base string
	http *http.Client
}

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("broker url: want an http or https URL")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureSkipTLSVerify} //nolint:gosec // the operator's explicit choice
	if len(cfg.CABundle) > 0 {
		if cfg.InsecureSkipTLSVerify {
			return nil, errors.New("a CA bundle and insecure-skip-tls-verify exclude each other")
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CABundle) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	egress := cfg.Egress
	if egress == nil {
		egress = &Egress{AllowLoopback: true}
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: egress.control}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	transport.MaxIdleConnsPerHost = 32
	// HTTP/2 takes its limit on a header list from this field too.
	transport.MaxResponseHeaderBytes = MaxHeader
	transport.DialContext = dialer.DialContext
	// A proxy would make the connection, and the policy would only see
	// the proxy's address.
	transport.Proxy = nil
	return &Client{
		cfg:  cfg,
		base: strings.TrimRight(cfg.URL, "/"),
		http: &http.Client{
			Transport: transport,
			Timeout:   cfg.Timeout,
			// OSB has no redirects; following one would send the
			// credentials wherever the broker (or whoever answers at its
			// URL) points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// CloseIdleConnections closes the client's connections to its broker
// that carry no request now, as when the broker is deleted.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// authorize sets the request's credentials and OSB headers.
func (c *Client) authorize(req *http.Request) {
	req.Header.Set("X-Broker-API-Version", APIVersion)
	switch {
	case c.cfg.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	case c.cfg.Username != "":
		req.SetBasicAuth(c.cfg.Username, c.cfg.Password)
	}
}

// HTTPError is a broker's answer with an unexpected status code.
type HTTPError struct {
	Status      int
	Code        string // the OSB "error" field
	Description string
	// InstanceUsable and UpdateRepeatable as the broker sent them, if it did.
	InstanceUsable   *bool
	UpdateRepeatable *bool
	// RetryAfter is the broker's Retry-After, when it sent one (OSB 2.15
	// and later allow it on errors such as 422 ConcurrencyError and 503).
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("broker answered %d", e.Status)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return msg
}
