package web_test

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/web"
	"github.com/bindery-dev/bindery/web/csrf"
	"github.com/bindery-dev/bindery/web/session"
)

// TestServerEnforces checks what the server refuses whatever a page
// offers: forms without their CSRF token, and actions beyond the role.
func TestServerEnforces(t *testing.T) {
	b := setup(t, setupOptions{})

	anon := b.client(t, "")
	res := anon.get("/")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Fatalf("anonymous /: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	login := anon.get("/login")
	csp := login.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("CSP %q", csp)
	}
	body(t, login)

	// Signing in without the CSRF token is refused; with it, the cookie
	// holds a session id, not the token.
	if res := anon.post("/login", url.Values{"token": {b.tokens["viewer"]}, "csrf": {"forged"}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in with a forged CSRF token: %d", res.StatusCode)
	}
	res = anon.post("/login", url.Values{"token": {b.tokens["viewer"]}})
	var sess *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == session.CookieName {
			sess = c
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || strings.Contains(sess.Value, b.tokens["viewer"]) || sess.Value == "" {
		t.Fatalf("session cookie %+v", sess)
	}

	// A viewer is refused every change, even with a valid form.
	viewer := anon
	for _, p := range []string{"/brokers", "/instances", "/bindings/00000000-0000-0000-0000-000000000000/reveal", "/instances/00000000-0000-0000-0000-000000000000/delete"} {
		if res := viewer.post(p, url.Values{"name": {"x"}}); res.StatusCode != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d", p, res.StatusCode)
		}
	}
	// A developer registers no broker.
	dev := b.client(t, catalog.RoleDeveloper)
	if res := dev.post("/brokers", url.Values{"name": {"x"}, "url": {"http://127.0.0.1:1"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("developer registering a broker: %d", res.StatusCode)
	}
	// An admin's bad registration names the field.
	admin := b.client(t, catalog.RoleAdmin)
	res = admin.post("/brokers", url.Values{"name": {"Bad Name"}, "url": {"ftp://x"}, "auth": {"none"}})
	page := body(t, res)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="b-name-error"`) || !strings.Contains(page, `id="b-url-error"`) {
		t.Fatalf("bad registration: %d", res.StatusCode)
	}
	// An admin form without the token is refused.
	if res := admin.post("/brokers", url.Values{"csrf": {""}, "name": {"x"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("form without CSRF token: %d", res.StatusCode)
	}

	// Signing out ends the session on the server.
	if res := viewer.post("/logout", url.Values{}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", res.StatusCode)
	}
	if _, err := b.store.LookupSession(t.Context(), sess.Value); err == nil {
		t.Fatal("the session outlived sign-out")
	}
}

// TestBindingFormErrors: a bad binding name is shown next to the bind
// form's field.
func TestBindingFormErrors(t *testing.T) {
	b := setup(t, setupOptions{broker: true})
	admin := b.client(t, catalog.RoleAdmin)
	if res := admin.post("/brokers", url.Values{"name": {"bindery"}, "url": {b.brokerURL}, "auth": {"basic"},
		"username": {brokerUser}, "password": {brokerPass}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("register: %d %s", res.StatusCode, body(t, res))
	}
	plans, err := b.store.ListPlans(t.Context(), catalog.PlanFilter{}, catalog.ListOptions{Limit: 1})
	if err != nil || len(plans.Items) == 0 {
		t.Fatalf("plans: %v", err)
	}
	res := admin.post("/instances", url.Values{"plan": {plans.Items[0].ID}, "name": {"db"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d %s", res.StatusCode, body(t, res))
	}
	instance := res.Header.Get("Location")
	res = admin.post(instance+"/bindings", url.Values{"name": {"Not A Name"}})
	page := body(t, res)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="bind-name-error"`) {
		t.Fatalf("bad binding name: %d", res.StatusCode)
	}
}

// TestLiveEndsWithSession: an open event stream tells the page, at the
// first change after its session ended, that live updates have stopped,
// and sends nothing more; it stays open (a stream the server closes makes
// the browser try again, logging errors) until the page leaves.
func TestLiveEndsWithSession(t *testing.T) {
	b := setup(t, setupOptions{})
	viewer := b.client(t, catalog.RoleViewer)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/live/brokers", nil)
	res, err := viewer.http.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v", err)
	}
	defer res.Body.Close()
	events := make(chan string, 16)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		r := bufio.NewReader(res.Body)
		var ev strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\n" {
				events <- ev.String()
				ev.Reset()
				continue
			}
			ev.WriteString(line)
		}
	}()
	// The browser is told to reconnect a second after losing the stream;
	// then it gets the current state.
	if first := <-events; first != "retry: 1000\n" {
		t.Fatalf("the stream starts with %q", first)
	}
	if first := <-events; !strings.HasPrefix(first, "event: rows") {
		t.Fatalf("first event %q", first)
	}
	if r := viewer.post("/logout", url.Values{}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", r.StatusCode)
	}
	// A stream checks its session at most once a second.
	time.Sleep(1100 * time.Millisecond)
	for _, name := range []string{"after", "later"} {
		br := &catalog.Broker{}
		br.Name, br.Spec.URL = name, "http://127.0.0.1:1"
		if _, err := b.store.CreateBroker(t.Context(), br, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-events:
			if name != "after" || !strings.HasPrefix(got, "event: ended") || !strings.Contains(got, "Live updates have stopped") {
				t.Fatalf("after sign-out the stream sent %q", got)
			}
		case <-closed:
			t.Fatal("the server closed the stream")
		case <-time.After(3 * time.Second):
			if name == "after" {
				t.Fatal("the page was not told that its session ended")
			}
		}
	}
	cancel()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end with the page")
	}
}

// TestCookiesOverTLS: served over TLS, the session, CSRF and notice
// cookies are Secure as well as HttpOnly and SameSite=Strict.
func TestCookiesOverTLS(t *testing.T) {
	b := setup(t, setupOptions{})
	e := serve.NewEcho(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	web.Register(e, b.store, nil, nil)
	srv := httptest.NewTLSServer(e)
	t.Cleanup(srv.Close)
	c := &client{t: t, base: srv.URL, http: srv.Client()}
	jar, _ := cookiejar.New(nil)
	c.http.Jar = jar
	c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res := c.get("/login")
	body(t, res)
	seen := map[string]*http.Cookie{}
	for _, ck := range res.Cookies() {
		seen[ck.Name] = ck
	}
	res = c.post("/login", url.Values{"token": {b.tokens[catalog.RoleAdmin]}})
	body(t, res)
	for _, ck := range res.Cookies() {
		seen[ck.Name] = ck
	}
	res = c.post("/brokers", url.Values{"name": {"tls"}, "url": {"http://127.0.0.1:1"}, "auth": {"none"}})
	body(t, res)
	for _, ck := range res.Cookies() {
		seen[ck.Name] = ck
	}
	for _, name := range []string{session.CookieName, csrf.CookieName, "bindery_flash"} {
		ck := seen[name]
		if ck == nil || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s: %+v", name, ck)
		}
	}
}
