// Package osbtest is a fake Open Service Broker (API 2.17) for tests that
// need a broker to misbehave on demand: answer 500 or 422, time out, return
// malformed bodies, fail asynchronous operations, or go down and come back.
// Otherwise it behaves as the spec says a well-behaved broker does
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md),
// keeping instances and bindings in memory so tests can check that nothing
// was left behind. Tests that need no misbehaviour use Bindery's own broker.
//
// A typical orphan-mitigation test:
//
//	b := osbtest.New(t, osbtest.WithBasicAuth("user", "pass"))
//	b.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 201, Body: "{", Times: 1})
//	// ... register b.URL() and provision an instance through Bindery ...
//	if in := b.Instances(); len(in) != 0 {
//		t.Errorf("orphans left at the broker: %+v", in)
//	}
package osbtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Broker is a fake OSB broker serving over HTTP (or HTTPS with WithTLS) on a
// loopback address. All its methods are safe for concurrent use.
type Broker struct {
	t       testing.TB
	opts    options
	handler http.Handler
	addr    string // host:port, kept across Down and Up
	url     string
	tls     *tls.Config // nil for plain HTTP
	caPEM   []byte
	client  *http.Client

	srvMu  sync.Mutex
	srv    *httptest.Server // nil while down
	cancel context.CancelFunc

	mu            sync.Mutex
	catalog       []Service
	catalogBody   []byte
	plans         map[string]*planRef
	instances     map[string]*instance
	bindings      map[bindingKey]*binding
	goneInstances map[string]*operation // see lastOperation
	goneBindings  map[bindingKey]*operation
	failures      map[Verb][]Failure
	requests      []Request
	counts        map[Verb]int
	opSeq         int
	notModified   int
}

type options struct {
	tls          bool
	username     string
	password     string
	token        string
	catalog      []Service
	async        bool
	polls        int
	retryAfter   time.Duration
	opPrefix     string
	goneOnDelete bool
	catalogETag  bool
	credentials  func(instanceID, bindingID string) map[string]any
}

// Option configures a Broker made by New.
type Option func(*options)

// WithTLS serves HTTPS with a certificate for 127.0.0.1, ::1 and localhost,
// signed by a CA made for this broker alone (see CAPEM), so a test can also
// check that another CA is refused.
func WithTLS() Option { return func(o *options) { o.tls = true } }

// WithBasicAuth requires HTTP basic authentication; other requests get 401.
func WithBasicAuth(username, password string) Option {
	return func(o *options) { o.username, o.password = username, password }
}

// WithBearerToken requires "Authorization: Bearer token"; other requests get
// 401. With WithBasicAuth as well, either is accepted.
func WithBearerToken(token string) Option { return func(o *options) { o.token = token } }

// WithCatalog sets the catalog the broker starts with instead of
// DefaultCatalog.
func WithCatalog(services []Service) Option { return func(o *options) { o.catalog = services } }

// WithCatalogETag makes the broker send its catalogue with an ETag and
// answer 304 Not Modified to a fetch that names it in If-None-Match, as OSB
// lets a broker do.
func WithCatalogETag() Option { return func(o *options) { o.catalogETag = true } }

// WithAsync makes every plan behave as if Plan.Async were set.
func WithAsync() Option { return func(o *options) { o.async = true } }

// WithPolls sets how many last_operation polls an asynchronous operation
// answers "in progress" before it finishes (default 1; 0 finishes on the
// first poll).
func WithPolls(n int) Option { return func(o *options) { o.polls = n } }

// WithRetryAfter sets the Retry-After header of "in progress" poll answers,
// rounded up to whole seconds (default 1s); a negative value leaves it out.
func WithRetryAfter(d time.Duration) Option { return func(o *options) { o.retryAfter = d } }

// WithOperationPrefix sets how operation ids begin (default "op-"; a counter
// follows). A prefix with reserved characters, such as "op/1 +x&y=%", shows
// clients that do not percent-encode the operation query parameter. An empty
// prefix makes the broker return no operation at all, as the spec allows.
func WithOperationPrefix(prefix string) Option { return func(o *options) { o.opPrefix = prefix } }

// WithGoneOnDelete makes the poll that finishes an asynchronous deprovision
// or unbind answer 410 Gone instead of 200 "succeeded". Polls after that one
// answer 410 either way.
func WithGoneOnDelete() Option { return func(o *options) { o.goneOnDelete = true } }

// WithCredentials sets the credentials returned for a new binding. By
// default they look like a database's: uri, username, a random password,
// host, port and database; a "host" and "port" also become the binding's
// endpoints.
func WithCredentials(fn func(instanceID, bindingID string) map[string]any) Option {
	return func(o *options) { o.credentials = fn }
}

// New starts a fake broker on a free loopback port and stops it when the
// test ends.
func New(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	o := options{polls: 1, retryAfter: time.Second, opPrefix: "op-", credentials: defaultCredentials}
	for _, opt := range opts {
		opt(&o)
	}
	b := &Broker{
		t:             t,
		opts:          o,
		instances:     map[string]*instance{},
		bindings:      map[bindingKey]*binding{},
		goneInstances: map[string]*operation{},
		goneBindings:  map[bindingKey]*operation{},
		failures:      map[Verb][]Failure{},
		counts:        map[Verb]int{},
	}
	if o.catalog == nil {
		o.catalog = DefaultCatalog()
	}
	b.SetCatalog(o.catalog)
	b.handler = b.routes()

	transport := &http.Transport{}
	if o.tls {
		cert, caPEM, err := newCertificate()
		if err != nil {
			t.Fatalf("osbtest: make certificate: %v", err)
		}
		b.tls = &tls.Config{Certificates: []tls.Certificate{cert}}
		b.caPEM = caPEM
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	b.client = &http.Client{Transport: transport}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("osbtest: listen: %v", err)
	}
	b.addr = l.Addr().String()
	b.start(l)
	b.url = b.srv.URL
	t.Cleanup(func() {
		b.Down()
		transport.CloseIdleConnections()
	})
	return b
}

// start serves on l. Requests' contexts derive from one that Down cancels,
// so delayed answers end at once.
func (b *Broker) start(l net.Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := &httptest.Server{
		Listener: l,
		Config: &http.Server{
			Handler:     b.handler,
			BaseContext: func(net.Listener) context.Context { return ctx },
			// TLS handshake errors from clients testing a wrong CA are expected.
			ErrorLog: log.New(io.Discard, "", 0),
		},
	}
	if b.tls != nil {
		srv.TLS = b.tls.Clone()
		srv.StartTLS()
	} else {
		srv.Start()
	}
	b.srv, b.cancel = srv, cancel
}

// URL is the broker's base URL, such as http://127.0.0.1:41234. It stays the
// same across Down and Up.
func (b *Broker) URL() string { return b.url }

// CAPEM is the PEM-encoded CA certificate that signed the broker's
// certificate (with WithTLS; nil otherwise): what a platform puts in its
// caBundle.
func (b *Broker) CAPEM() []byte { return b.caPEM }

// Client returns an HTTP client for the broker: with WithTLS it trusts CAPEM.
func (b *Broker) Client() *http.Client { return b.client }

// Down stops the broker as if its process died: the listener is closed, so
// new connections are refused, and open connections are cut, answering
// nothing to requests in flight. State (instances, bindings, failures) is
// kept for Up.
func (b *Broker) Down() {
	b.srvMu.Lock()
	defer b.srvMu.Unlock()
	if b.srv == nil {
		return
	}
	// Refuse new connections first, so a client retrying on a new
	// connection gets no answer either; then cut the open ones.
	_ = b.srv.Listener.Close()
	b.srv.CloseClientConnections()
	b.cancel()
	b.srv.Close()
	b.srv = nil
}

// Up serves again on the same address after Down. Call it from the test's
// goroutine: it fails the test if the address has been taken meanwhile.
func (b *Broker) Up() {
	b.t.Helper()
	b.srvMu.Lock()
	defer b.srvMu.Unlock()
	if b.srv != nil {
		return
	}
	l, err := net.Listen("tcp", b.addr)
	if err != nil {
		b.t.Fatalf("osbtest: listen again on %s: %v", b.addr, err)
	}
	b.start(l)
}

// newCertificate makes a CA and a server certificate for loopback signed by
// it, returning the server certificate and the CA in PEM.
func newCertificate() (tls.Certificate, []byte, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "osbtest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "osbtest broker"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caPEM, nil
}

// defaultCredentials are database-like credentials, unique per binding.
func defaultCredentials(instanceID, bindingID string) map[string]any {
	user := "u" + fmt.Sprintf("%x", sha256.Sum256([]byte(instanceID+"/"+bindingID)))[:12]
	db := "db" + fmt.Sprintf("%x", sha256.Sum256([]byte(instanceID)))[:12]
	password := rand.Text()
	const host, port = "db.osbtest.invalid", 5432
	return map[string]any{
		"uri":      fmt.Sprintf("postgres://%s:%s@%s:%d/%s", user, password, host, port, db),
		"username": user,
		"password": password,
		"host":     host,
		"port":     port,
		"database": db,
	}
}
