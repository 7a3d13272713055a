package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/abandontest"
)

// TestAbandonThroughWeb: a deleting object's page offers to abandon it;
// the confirmation says what stays behind at the broker; once the name is
// typed, an instance and a binding whose deletion a broker refuses, or
// never answers, are gone at once, and the history names the signed-in
// token.
func TestAbandonThroughWeb(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	token, _, err := b.store.IssueToken(context.Background(), catalog.TokenRequest{Name: "web-ops", Role: catalog.RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	b.tokens["web-ops"] = token
	c := b.client(t, "web-ops")
	viewer := b.client(t, catalog.RoleViewer)
	abandontest.Run(t, b.store, func(t *testing.T, kind, _, name, id string) {
		page := "/" + kind + "s/" + id
		if html := body(t, c.get(page)); !strings.Contains(html, `href="`+page+`/abandon"`) {
			t.Errorf("the deleting %s's page has no abandon button", kind)
		}
		if html := body(t, viewer.get(page)); strings.Contains(html, page+"/abandon") {
			t.Errorf("a viewer is offered to abandon the %s", kind)
		}
		left := "stays at the broker"
		if kind == "binding" {
			left = "stay valid at the broker"
		}
		if html := body(t, c.get(page+"/abandon")); !strings.Contains(html, left) {
			t.Errorf("the confirmation does not say what stays behind at the broker:\n%s", html)
		}
		if res := c.post(page+"/abandon", url.Values{"confirm": {"not-" + name}}); res.StatusCode != http.StatusBadRequest {
			t.Errorf("a wrong name to confirm: %d, want 400", res.StatusCode)
		}
		if res := c.post(page+"/abandon", url.Values{"confirm": {name}}); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("abandon %s %s: %d\n%s", kind, name, res.StatusCode, body(t, res))
		}
	}, `"web-ops" in the web UI`)
}
