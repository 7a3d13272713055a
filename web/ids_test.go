package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/bindery-dev/bindery/catalog"
)

// TestIDForms: the forms of a UUID other than the canonical one
// (urn:uuid:…, braced, without hyphens) name no object: every page and
// action of an id answers 404 to them, not 500.
func TestIDForms(t *testing.T) {
	b := setup(t, setupOptions{})
	admin := b.client(t, catalog.RoleAdmin)
	id := uuid.NewString()
	for _, form := range []string{"urn:uuid:" + id, "URN:UUID:" + id, "{" + id + "}", strings.ReplaceAll(id, "-", "")} {
		f := url.PathEscape(form)
		for _, p := range []string{
			"/instances/" + f, "/instances/" + f + "/events", "/instances/" + f + "/delete", "/instances/" + f + "/abandon",
			"/live/instances/" + f, "/bindings/" + f, "/bindings/" + f + "/events", "/bindings/" + f + "/delete",
			"/live/bindings/" + f, "/brokers/" + f + "/events", "/brokers/" + f + "/delete",
			"/services/" + f, "/services/" + f + "/icon", "/plans/" + f, "/instances/new?plan=" + url.QueryEscape(form),
		} {
			if status, _ := admin.getSoon(p); status != http.StatusNotFound {
				t.Errorf("GET %s: %d", p, status)
			}
		}
		for p, values := range map[string]url.Values{
			"/instances/" + f: {}, "/instances/" + f + "/delete": {"confirm": {"x"}}, "/instances/" + f + "/bindings": {"name": {"x"}},
			"/bindings/" + f + "/reveal": {}, "/bindings/" + f + "/delete": {"confirm": {"x"}},
			"/brokers/" + f + "/relist": {}, "/brokers/" + f + "/delete": {"confirm": {"x"}},
			"/instances": {"plan": {form}, "name": {"x"}},
		} {
			res := admin.post(p, values)
			body(t, res)
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("POST %s: %d", p, res.StatusCode)
			}
		}
	}
}
