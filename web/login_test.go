package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLoginRedirectStaysHere is the attack: /login?next=/%09/host/path
// must neither offer the tab in its form nor answer a sign-in with it in
// Location.
func TestLoginRedirectStaysHere(t *testing.T) {
	b := setup(t, setupOptions{})
	c := b.client(t, "")
	page := body(t, c.get("/login?next=/%09/evil.example/path"))
	if strings.Contains(page, "evil.example") {
		t.Errorf("the sign-in form carries the destination on:\n%s", page)
	}
	for _, next := range []string{"/\t/evil.example/path", "/\\evil.example", "/instances"} {
		res := c.post("/login", url.Values{"token": {b.tokens["viewer"]}, "next": {next}})
		want := "/"
		if next == "/instances" {
			want = next
		}
		if got := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || got != want {
			t.Errorf("sign-in with next %q: %d Location %q, want %q", next, res.StatusCode, got, want)
		}
	}
}
