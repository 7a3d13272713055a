package restapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestIDForms: an id is a UUID in its canonical form (8-4-4-4-12 hex
// digits). The other forms Go's uuid package reads (urn:uuid:…, braced,
// without hyphens) name no object: every route of an id answers 404 to
// them, as to any other name of nothing, rather than sending PostgreSQL
// text it refuses as a uuid (500).
func TestIDForms(t *testing.T) {
	b := setup(t)
	id := uuid.NewString()
	routes := []struct {
		method, path string
		body         any
	}{
		{"GET", "/instances/%s", nil}, {"PATCH", "/instances/%s", map[string]any{}}, {"DELETE", "/instances/%s", nil},
		{"POST", "/instances/%s/abandon", nil}, {"GET", "/instances/%s/events", nil},
		{"GET", "/bindings/%s", nil}, {"DELETE", "/bindings/%s", nil}, {"POST", "/bindings/%s/abandon", nil},
		{"GET", "/bindings/%s/credentials", nil}, {"GET", "/bindings/%s/events", nil},
		{"GET", "/brokers/%s", nil}, {"PATCH", "/brokers/%s", map[string]any{}}, {"DELETE", "/brokers/%s", nil},
		{"POST", "/brokers/%s/relist", nil}, {"GET", "/brokers/%s/events", nil},
		{"GET", "/serviceclasses/%s", nil}, {"GET", "/serviceplans/%s", nil}, {"GET", "/serviceplans/%s/schemas", nil},
		{"GET", "/serviceplans/%s/visibility", nil}, {"DELETE", "/serviceplans/%s/visibility", nil},
		{"DELETE", "/tokens/%s", nil},
	}
	forms := []string{"urn:uuid:" + id, "URN:UUID:" + id, "{" + id + "}", strings.ReplaceAll(id, "-", "")}
	for _, r := range routes {
		for _, form := range forms {
			path := fmt.Sprintf(r.path, url.PathEscape(form))
			if got := b.do(b.admin, r.method, path, r.body); got.status != http.StatusNotFound {
				t.Errorf("%s %s: %d %s", r.method, path, got.status, got.raw)
			}
		}
	}
}
