package osb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bindery-dev/bindery/internal/pgtext"
)

// answering is a broker that answers every request with status and body.
func answering(t *testing.T, status int, body func(w http.ResponseWriter)) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		body(w)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{URL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func text(s string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { _, _ = w.Write([]byte(s)) }
}

func jsonOf(v any) func(http.ResponseWriter) {
	raw, _ := json.Marshal(v)
	return text(string(raw))
}

// endless writes JSON that never ends: a description without an end.
func endless(w http.ResponseWriter) {
	_, _ = w.Write([]byte(`{"error":"Hostile","description":"`))
	chunk := []byte(strings.Repeat("x", 64<<10))
	for {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

func provision(c *Client) (*OperationResponse, error) {
	return c.Provision(context.Background(), &ProvisionRequest{InstanceID: "i", ServiceID: "s", PlanID: "p", AcceptsIncomplete: true})
}

// TestErrorTextBounded: a broker's error description, however long, is
// kept cut to MaxDescription on a character boundary with a visible mark,
// and NUL (which PostgreSQL cannot store) is replaced; an error answer
// larger than MaxAnswer, or one that never ends, is not read past it.
func TestErrorTextBounded(t *testing.T) {
	t.Parallel()
	long := "hostile " + strings.Repeat("é", 2<<20) // 4 MB
	for _, tc := range []struct {
		name string
		body func(http.ResponseWriter)
		want string // the description begins so
	}{
		{"long description", jsonOf(map[string]string{"error": "Hostile", "description": strings.Repeat("ü", 20<<10)}), "üü"},
		{"NUL", jsonOf(map[string]string{"description": "a\x00b"}), "a\uFFFDb"},
		{"larger than the cap", jsonOf(map[string]string{"description": long}), "the broker's answer"},
		{"endless", endless, "the broker's answer"},
	} {
		_, err := provision(answering(t, 500, tc.body))
		var he *HTTPError
		if !errors.As(err, &he) || he.Status != 500 {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d := he.Description
		if len(d) > MaxDescription || !utf8.ValidString(d) || pgtext.Problem(d) != "" || !strings.HasPrefix(d, tc.want) {
			t.Errorf("%s: description of %d bytes: %.80q…", tc.name, len(d), d)
		}
		if tc.name == "long description" && (!strings.HasSuffix(d, pgtext.ClipMark) || he.Code != "Hostile") {
			t.Errorf("%s: not marked as cut, or the code is lost: %q %q", tc.name, he.Code, d[len(d)-20:])
		}
		if len(err.Error()) > MaxDescription+100 {
			t.Errorf("%s: error message of %d bytes", tc.name, len(err.Error()))
		}
	}
}

// TestOperationAnswersBounded: success answers are read up to MaxAnswer
// (MaxBindingAnswer for bindings); an operation longer than OSB's 10,000
// characters or credentials larger than MaxCredentials make the answer
// malformed; a dashboard_url longer than MaxDashboardURL, or not an
// absolute http or https URL, is ignored; a
// poll's description is cut.
func TestOperationAnswersBounded(t *testing.T) {
	t.Parallel()
	op := strings.Repeat("ö", MaxOperation)
	res, err := provision(answering(t, 202, jsonOf(map[string]string{"operation": op})))
	if err != nil || res.Operation != op {
		t.Errorf("an operation of 10,000 characters: %v", err)
	}
	var me *MalformedError
	if _, err := provision(answering(t, 202, jsonOf(map[string]string{"operation": op + "x"}))); !errors.As(err, &me) || me.Status != 202 {
		t.Errorf("an operation of 10,001 characters: %v", err)
	}
	if _, err := provision(answering(t, 201, endless)); !errors.As(err, &me) || me.Status != 201 || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an endless 201: %v", err)
	}
	res, err = provision(answering(t, 201, jsonOf(map[string]string{"dashboard_url": "https://d.example/" + strings.Repeat("a", MaxDashboardURL)})))
	if err != nil || res.DashboardURL != "" {
		t.Fatalf("a long dashboard URL: %v %+v", err, res)
	}
	for _, u := range []string{"javascript:alert(1)", "data:text/html,x", "//d.example/x", "/x", "https://", "ftp://d.example/x"} {
		res, err = provision(answering(t, 201, jsonOf(map[string]string{"dashboard_url": u})))
		if err != nil || res.DashboardURL != "" {
			t.Errorf("a dashboard URL %q: %v %+v, want it ignored", u, err, res)
		}
	}
	res, err = provision(answering(t, 201, jsonOf(map[string]string{"dashboard_url": "https://d.example/x"})))
	if err != nil || res.DashboardURL != "https://d.example/x" {
		t.Errorf("a dashboard URL: %v %+v", err, res)
	}

	poll := func(description string) (*LastOperationResponse, error) {
		return answering(t, 200, jsonOf(map[string]string{"state": "failed", "description": description})).
			LastOperation(context.Background(), &LastOperationRequest{InstanceID: "i"})
	}
	lo, err := poll(strings.Repeat("d", 60<<10))
	if err != nil || len(lo.Description) > MaxDescription || !strings.HasSuffix(lo.Description, pgtext.ClipMark) {
		t.Fatalf("a poll's long description: %v, %+v", err, lo)
	}
	if _, err := poll(strings.Repeat("d", 1<<20)); !errors.As(err, &me) || me.Status != 200 {
		t.Errorf("a poll's answer larger than MaxAnswer: %v", err)
	}

	bind := func(body func(http.ResponseWriter)) (*BindResponse, error) {
		return answering(t, 201, body).Bind(context.Background(), &BindRequest{InstanceID: "i", BindingID: "b", ServiceID: "s", PlanID: "p"})
	}
	cert := strings.Repeat("c", 40<<10) // a certificate chain fits
	if b, err := bind(jsonOf(map[string]any{"credentials": map[string]string{"ca": cert}})); err != nil || b.Credentials["ca"] != cert {
		t.Errorf("credentials of 40 KiB: %v", err)
	}
	if _, err := bind(jsonOf(map[string]any{"credentials": map[string]string{"ca": strings.Repeat("c", MaxCredentials)}})); !errors.As(err, &me) || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("credentials larger than MaxCredentials: %v", err)
	}
	many := make([]Endpoint, MaxEndpoints+1)
	for i := range many {
		many[i] = Endpoint{Host: fmt.Sprintf("h%d.example", i), Ports: []string{"5432"}}
	}
	if _, err := bind(jsonOf(map[string]any{"endpoints": many})); !errors.As(err, &me) || !strings.Contains(err.Error(), "endpoints") {
		t.Errorf("too many endpoints: %v", err)
	}
	if _, err := bind(jsonOf(map[string]any{"endpoints": []Endpoint{{Host: strings.Repeat("h", 254), Ports: []string{"1"}}}})); !errors.As(err, &me) {
		t.Errorf("an endpoint host of 254 bytes: %v", err)
	}
	if _, err := bind(jsonOf(map[string]any{"endpoints": []Endpoint{{Host: "h", Ports: []string{strings.Repeat("1", 40<<10)}}}})); !errors.As(err, &me) {
		t.Errorf("an endpoint port of 40 KiB: %v", err)
	}
	if b, err := bind(jsonOf(map[string]any{"endpoints": []Endpoint{{Host: "db.example", Ports: []string{"5432", "6000-6010"}, Protocol: "tcp"}}})); err != nil || len(b.Endpoints) != 1 {
		t.Errorf("a usual endpoint: %v", err)
	}
}

// TestCatalogueBounded: a catalogue past MaxCatalog is refused without
// reading on (one that never ends included); text PostgreSQL cannot store
// and ids or names past MaxCatalogID make it invalid, with their paths.
func TestCatalogueBounded(t *testing.T) {
	t.Parallel()
	endlessCatalog := func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(`{"services":[{"id":"a","name":"a","description":"`))
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	if _, err := answering(t, 200, endlessCatalog).Catalog(context.Background(), Fetched{}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an endless catalogue: %v", err)
	}
	service := func(id, name, description string) string {
		raw, _ := json.Marshal(map[string]any{"id": id, "name": name, "description": description, "bindable": true,
			"plans": []map[string]string{{"id": id + "-p", "name": "p", "description": "d"}}})
		return string(raw)
	}
	for _, tc := range []struct{ doc, says string }{
		{`{"services":[` + service("a", "a", "x\x00y") + `]}`, "services[0].description: contains a NUL"},
		{`{"services":[` + service(strings.Repeat("i", 256), "a", "d") + `]}`, "services[0].id: longer than 255 bytes"},
		{`{"services":[` + service("a", "a", "d") + `,` + service("b", strings.Repeat("n", 300), "d") + `]}`, "services[1].name: longer than 255 bytes"},
		{`{"services":[` + service("a", "a", "d") + `]} {}`, "not valid JSON"},
		{`{"services":null}`, "services: required"},
		{`[]`, "not valid JSON"},
	} {
		_, err := answering(t, 200, text(tc.doc)).Catalog(context.Background(), Fetched{})
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%.60s: %v, want %q", tc.doc, err, tc.says)
		}
	}
	cat, err := answering(t, 200, text(`{"extra":[1,2],"services":[`+service("a", "a", "d")+`]}`)).Catalog(context.Background(), Fetched{})
	if err != nil || cat.Len() != 1 {
		t.Fatalf("a valid catalogue: %v", err)
	}
	if svc, err := cat.Service(0); err != nil || svc.ID != "a" || len(svc.Plans) != 1 || strings.Contains(string(svc.Raw), "plans") {
		t.Errorf("its service: %v %+v", err, svc)
	}
}

// TestHeaderBounded: only answers' bodies were bounded; their header was
// read whole, up to net/http's default of 10 MiB (and kept with the
// answer), so a hostile broker's answers in flight could hold 160 MiB of
// the engine's memory per broker. A header past MaxHeader is now not
// read, over HTTP/1.1 and HTTP/2 alike (which takes its limit from the
// same field), for every request the engine and the catalog send:
// the request fails as a broker's failure, not as an answer.
func TestHeaderBounded(t *testing.T) {
	t.Parallel()
	requests := map[string]func(*Client) error{
		"provision": func(c *Client) error { _, err := provision(c); return err },
		"bind": func(c *Client) error {
			_, err := c.Bind(context.Background(), &BindRequest{InstanceID: "i", BindingID: "b", ServiceID: "s", PlanID: "p"})
			return err
		},
		"last operation": func(c *Client) error {
			_, err := c.LastOperation(context.Background(), &LastOperationRequest{InstanceID: "i"})
			return err
		},
		"catalog": func(c *Client) error { _, err := c.Catalog(context.Background(), Fetched{}); return err },
		"probe":   func(c *Client) error { return c.Probe(context.Background()) },
	}
	for _, version := range []int{1, 2} {
		for _, size := range []int{MaxHeader / 2, 2 * MaxHeader, 8 << 20} {
			c, proto := headerOf(t, version == 2, size)
			for name, send := range requests {
				err := send(c)
				var he *HTTPError
				switch {
				case size <= MaxHeader && err != nil:
					t.Errorf("HTTP/%d, %s: a header of %d bytes refused: %v", version, name, size, err)
				case size > MaxHeader && (err == nil || errors.As(err, &he)):
					t.Errorf("HTTP/%d, %s: a header of %d bytes read (error %v)", version, name, size, err)
				}
				if got := proto.Load(); got != int32(version) {
					t.Errorf("%s: answered over HTTP/%d, want HTTP/%d", name, got, version)
				}
			}
		}
	}
}

// headerOf is a TLS broker (HTTP/2 when h2) whose answers carry size
// bytes of header fields, each of 1 KiB, with a catalogue, a binding or
// an operation's state as their body; proto is the HTTP version of its
// last request.
func headerOf(t *testing.T, h2 bool, size int) (*Client, *atomic.Int32) {
	t.Helper()
	proto := &atomic.Int32{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(int32(r.ProtoMajor))
		for i := range size >> 10 {
			w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("x", 1<<10-32))
		}
		w.Header().Set("Content-Type", "application/json")
		body := `{"state":"in progress","credentials":{}}`
		if strings.HasSuffix(r.URL.Path, "/catalog") {
			body = `{"services":[]}`
		}
		_, _ = w.Write([]byte(body))
	}))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c, err := New(Config{URL: srv.URL, InsecureSkipTLSVerify: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c, proto
}
