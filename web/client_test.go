package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/web/csrf"
)

// client is a browser without a browser: a cookie jar signed in with a
// role's token, for the server's own checks and the benchmarks.
type client struct {
	t    testing.TB
	base string
	http *http.Client
}

func (b *bundle) client(t testing.TB, role string) *client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &client{t: t, base: b.url, http: &http.Client{Jar: jar, Transport: &http.Transport{MaxIdleConnsPerHost: 100, MaxConnsPerHost: 0},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	c.get("/login")
	if role != "" {
		if res := c.post("/login", url.Values{"token": {b.tokens[role]}}); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in as %s: %d", role, res.StatusCode)
		}
	}
	return c
}

func (c *client) csrf() string {
	u, _ := url.Parse(c.base)
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == csrf.CookieName {
			return ck.Value
		}
	}
	return ""
}

func (c *client) get(path string) *http.Response {
	c.t.Helper()
	res, err := c.http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	return res
}

// getSoon is get for addresses that might answer with an endless event
// stream: the answer must come, whole, within a few seconds.
func (c *client) getSoon(path string) (int, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Errorf("GET %s: %v", path, err)
		return 0, ""
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Errorf("GET %s: %d, then %v", path, res.StatusCode, err)
	}
	return res.StatusCode, string(raw)
}

// post sends a form with the CSRF token (unless the form has one).
func (c *client) post(path string, form url.Values) *http.Response {
	c.t.Helper()
	if !form.Has(csrf.FieldName) {
		form.Set(csrf.FieldName, c.csrf())
	}
	res, err := c.http.Post(c.base+path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	return res
}

func body(t testing.TB, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
