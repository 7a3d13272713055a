package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestListNamespaceChecked: a list page's namespace that cannot name one is
// a 400, the same for the page and its live stream. The stream used to
// answer 200 and stay open, following a namespace no object can be in.
// A namespace of spaces is one too: it was trimmed to none and answered
// every namespace's objects, as if no filter had been asked for. An empty
// namespace, which the filter's "all" sends, is every namespace.
func TestListNamespaceChecked(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	c := b.client(t, "admin")
	for _, path := range []string{"/live/instances?namespace=A_B", "/live/bindings?namespace=-a", "/instances?namespace=A_B",
		"/bindings?namespace=%20", "/live/bindings?namespace=%20%20", "/instances?namespace=%20default", "/live/instances?namespace=default%09"} {
		if code, _ := c.getSoon(path); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", path, code)
		}
	}
	for _, path := range []string{"/bindings?namespace=", "/instances?namespace=default"} {
		if code, _ := c.getSoon(path); code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, code)
		}
	}
	// The quotas page's namespace too, shown or removed.
	if code, _ := c.getSoon("/quotas?namespace=A_B"); code != http.StatusBadRequest {
		t.Errorf("GET /quotas?namespace=A_B: %d, want 400", code)
	}
	if res := c.post("/quotas/delete", url.Values{"namespace": {strings.Repeat("a", 300)}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("POST /quotas/delete of a 300-character namespace: %d, want 400", res.StatusCode)
	}
}
