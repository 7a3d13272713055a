package web_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/web/csrf"
)

// inputBundle is a catalogue, an instance, a binding and a broker to aim
// bad input at, and an admin signed in.
type inputBundle struct {
	*bundle
	admin   *client
	plan    *catalog.ServicePlan
	in      *catalog.Instance
	binding *catalog.Binding
	broker  *catalog.Broker
}

func inputSetup(t testing.TB) *inputBundle {
	b := setup(t, setupOptions{})
	ib := &inputBundle{bundle: b}
	ib.plan = b.fakeBroker(t, "fake", osbtest.GenerateCatalog(1, 1))
	ib.in = b.instance(t, ib.plan, "default", "target")
	ib.binding = b.binding(t, ib.in, "target-app")
	brokers, err := b.store.ListBrokers(t.Context(), catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ib.broker = brokers.Items[0]
	ib.admin = b.client(t, catalog.RoleAdmin)
	return ib
}

// TestUnstorableInput: text PostgreSQL cannot hold (a NUL character,
// invalid UTF-8) in any form field, query or path parameter is refused
// with 400, shown next to its field where a form shows one, and nothing of
// it is stored.
func TestUnstorableInput(t *testing.T) {
	b := inputSetup(t)
	nul, bad := "a\x00b", "a\xffb"
	forms := []struct {
		path   string
		form   url.Values
		errID  string // the element that must show the error, or "" for an error page
		phrase string
	}{
		{"/instances", url.Values{"plan": {b.plan.ID}, "name": {nul}}, "f-name-error", "NUL"},
		{"/instances", url.Values{"plan": {b.plan.ID}, "name": {"ok"}, "namespace": {bad}}, "f-namespace-error", "UTF-8"},
		{"/instances", url.Values{"plan": {b.plan.ID}, "name": {"ok"}, "spec.parameters.size": {bad}}, "f-spec-parameters-size-error", "UTF-8"},
		{"/instances", url.Values{"plan": {b.plan.ID}, "name": {"ok"}, "spec.parameters.region": {nul}}, "f-spec-parameters-region-error", "NUL"},
		{"/instances", url.Values{"plan": {b.plan.ID}, "name": {"ok"}, "x\x00y": {"1"}}, "", "has a name that contains a NUL"},
		{"/instances", url.Values{"plan": {nul}, "name": {"ok"}}, "", "plan"},
		{"/instances/" + b.in.ID, url.Values{"spec.parameters.size": {nul}}, "f-spec-parameters-size-error", "NUL"},
		{"/instances/" + b.in.ID + "/bindings", url.Values{"name": {bad}}, "bind-name-error", "UTF-8"},
		{"/instances/" + b.in.ID + "/bindings", url.Values{"name": {"ok"}, "binding.parameters.region": {nul}}, "f-binding-parameters-region-error", "NUL"},
		{"/instances/" + b.in.ID + "/delete", url.Values{"confirm": {nul}}, "confirm-error", "NUL"},
		{"/bindings/" + b.binding.ID + "/delete", url.Values{"confirm": {bad}}, "confirm-error", "UTF-8"},
		{"/brokers/" + b.broker.ID + "/delete", url.Values{"confirm": {nul}}, "confirm-error", "NUL"},
		{"/brokers", url.Values{"name": {nul}, "url": {"http://127.0.0.1:1"}, "auth": {"none"}}, "b-name-error", "NUL"},
		{"/brokers", url.Values{"name": {"ok"}, "url": {"http://127.0.0.1:1/" + bad}, "auth": {"none"}}, "b-url-error", "UTF-8"},
		{"/brokers", url.Values{"name": {"ok"}, "url": {"http://127.0.0.1:1"}, "auth": {"basic"}, "username": {"u"}, "password": {nul}}, "b-pass-error", "NUL"},
		{"/brokers", url.Values{"name": {"ok"}, "url": {"http://127.0.0.1:1"}, "auth": {"bearer"}, "token": {bad}}, "b-token-error", "UTF-8"},
		{"/brokers", url.Values{"name": {"ok"}, "url": {"http://127.0.0.1:1"}, "auth": {nul}}, "b-auth-error", "NUL"},
		{"/brokers/" + b.broker.ID + "/relist", url.Values{"note": {nul}}, "", "note&#34; contains a NUL"},
		{"/bindings/" + b.binding.ID + "/reveal", url.Values{"why": {bad}}, "", "why&#34; is not valid UTF-8"},
		{"/login", url.Values{"token": {nul}}, "token-error", "NUL"},
	}
	for _, tc := range forms {
		res := b.admin.post(tc.path, tc.form)
		page := body(t, res)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, tc.phrase) {
			t.Errorf("POST %s %q: %d, want 400 saying %q", tc.path, tc.form, res.StatusCode, tc.phrase)
			continue
		}
		if tc.errID != "" && !strings.Contains(page, `id="`+tc.errID+`"`) {
			t.Errorf("POST %s %q: no error next to the field (#%s)", tc.path, tc.form, tc.errID)
		}
		if strings.Contains(page, nul) || strings.Contains(page, bad) {
			t.Errorf("POST %s: the bad text is shown back", tc.path)
		}
	}
	// The same from a multipart form.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range map[string]string{csrf.FieldName: b.admin.csrf(), "plan": b.plan.ID, "name": nul} {
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	res, err := b.admin.http.Post(b.url+"/instances", mw.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	if page := body(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="f-name-error"`) {
		t.Errorf("multipart: %d", res.StatusCode)
	}
	// A body over the limit.
	big := url.Values{"plan": {b.plan.ID}, "name": {strings.Repeat("x", 2<<20)}}
	if res := b.admin.post("/instances", big); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("2 MiB form: %d, want 413", res.StatusCode)
	}

	for _, p := range []string{
		"/?q=%00", "/?tag=%FF", "/?broker=a%00", "/?price=%C3%28", "/?%00=1",
		"/instances?namespace=%00", "/instances?continue=%FF", "/bindings?namespace=%FF", "/live/instances?namespace=%00",
		"/login?next=%00", "/plans/%00", "/plans/%FF", "/instances/%00", "/instances/a%FFb/events",
		"/bindings/%00/delete", "/brokers/%FF/events", "/live/bindings/%00", "/instances/new?plan=%00",
		"/namespaces/default/instances/a%00b", "/namespaces/%FF/instances/db",
		"/?q=%zz",
	} {
		status, page := b.admin.getSoon(p)
		if status != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", p, status)
		}
		if !utf8.ValidString(page) || strings.Contains(page, "\x00") {
			t.Errorf("GET %s: the page carries the bad text back", p)
		}
	}

	// Nothing was stored.
	if l, _ := b.store.ListInstances(t.Context(), catalog.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("%d instances", len(l.Items))
	}
	if l, _ := b.store.ListBrokers(t.Context(), catalog.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("%d brokers", len(l.Items))
	}
	if strings.Contains(b.logs.String(), "web request failed") {
		t.Errorf("a request failed:\n%s", b.logs.String())
	}
}

// TestBrokerAuthChecked: an auth the registration form does not offer
// is a 400 shown next to the credentials. auth=Basic (or any other word)
// was read as none, and the broker registered without the credentials
// posted beside it.
func TestBrokerAuthChecked(t *testing.T) {
	b := inputSetup(t)
	for _, form := range []url.Values{
		{"name": {"choice"}, "url": {"http://127.0.0.1:1"}, "auth": {"Basic"}, "username": {"u"}, "password": {"p"}},
		{"name": {"choice"}, "url": {"http://127.0.0.1:1"}, "auth": {"oauth"}, "token": {"t"}},
	} {
		res := b.admin.post("/brokers", form)
		if page := body(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="b-auth-error">must be basic, bearer or none`) {
			t.Errorf("POST /brokers auth=%q: %d, want 400 saying auth must be basic, bearer or none", form.Get("auth"), res.StatusCode)
		}
	}
	if l, _ := b.store.ListBrokers(t.Context(), catalog.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("%d brokers: a refused registration was recorded", len(l.Items))
	}
}

// TestQuotaChoicesChecked: a value the quota form's radio (default) or
// checkbox (paid) does not have is a 400 naming it. paid=yes was read as
// unchecked and set a quota that refuses paid plans; default=yes set a
// namespace's quota.
func TestQuotaChoicesChecked(t *testing.T) {
	b := inputSetup(t)
	for _, tc := range []struct {
		form   url.Values
		phrase string
	}{
		{url.Values{"namespace": {"team"}, "instances": {"1"}, "paid": {"yes"}}, "paid: must be true, or not posted"},
		{url.Values{"namespace": {"team"}, "instances": {"1"}, "default": {"yes"}}, "default: must be true or false"},
	} {
		res := b.admin.post("/quotas", tc.form)
		if page := body(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, tc.phrase) {
			t.Errorf("POST /quotas %q: %d, want 400 saying %q", tc.form, res.StatusCode, tc.phrase)
		}
	}
	if _, err := b.store.GetQuota(t.Context(), "team"); err == nil {
		t.Errorf("a refused quota was set")
	}
	if status, page := b.admin.getSoon("/quotas?default=yes"); status != http.StatusBadRequest || !strings.Contains(page, "default must be true or false") {
		t.Errorf("GET /quotas?default=yes: %d, want 400 naming default", status)
	}
	if status, _ := b.admin.getSoon("/quotas?default=false"); status != http.StatusOK {
		t.Errorf("GET /quotas?default=false: %d, want 200", status)
	}
}

// TestUnknownPlanNamed: an instance form naming a plan that does not
// exist is a 404 that says the plan is missing; it said "That instance
// does not exist", of an instance not created yet.
func TestUnknownPlanNamed(t *testing.T) {
	b := inputSetup(t)
	for _, plan := range []string{"nosuch", strings.Repeat("p", 10_000)} {
		res := b.admin.post("/instances", url.Values{"plan": {plan}, "name": {"db"}})
		if page := body(t, res); res.StatusCode != http.StatusNotFound || !strings.Contains(page, "That service plan does not exist") {
			t.Errorf("POST /instances plan=%.20s: %d, want 404 saying the plan does not exist", plan, res.StatusCode)
		}
	}
	if status, page := b.admin.getSoon("/instances/new?plan=nosuch"); status != http.StatusNotFound || !strings.Contains(page, "That service plan does not exist") {
		t.Errorf("GET /instances/new?plan=nosuch: %d, want 404 saying the plan does not exist", status)
	}
}

// TestMarketplaceQueryChecked: a price the marketplace's filter does not
// offer, or a page number that is none, is a 400 naming the parameter;
// they were read as no filter and the first page without a word.
func TestMarketplaceQueryChecked(t *testing.T) {
	b := inputSetup(t)
	for _, tc := range []struct{ path, param string }{
		{"/?price=cheap", "price"},
		{"/?page=abc", "page"},
		{"/?page=0", "page"},
		{"/?page=-1", "page"},
		{"/?page=1000001", "page"},
	} {
		if status, page := b.admin.getSoon(tc.path); status != http.StatusBadRequest || !strings.Contains(page, "The query parameter "+tc.param+" must be") {
			t.Errorf("GET %s: %d, want 400 naming %s", tc.path, status, tc.param)
		}
	}
	// What the page itself sends is taken.
	for _, p := range []string{"/?price=free", "/?price=paid&page=2", "/?price=", "/?page=1"} {
		if status, _ := b.admin.getSoon(p); status != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", p, status)
		}
	}
}

// TestEveryFormFieldChecked: in every form's fields that TestUnstorableInput
// does not cover, and in every field for an over-long value, a NUL
// character, invalid UTF-8 and a 100,000-character value are a 400 that
// names the field (next to it where the form shows one, in the page's
// sentence otherwise), and nothing is stored. A form posted without its
// CSRF token, or with another session's, is a 403 on every POST route.
func TestEveryFormFieldChecked(t *testing.T) {
	b := inputSetup(t)
	in, binding, broker := "/instances/"+b.in.ID, "/bindings/"+b.binding.ID, "/brokers/"+b.broker.ID
	basic := url.Values{"name": {"ok"}, "url": {"http://127.0.0.1:1"}, "auth": {"basic"}, "username": {"u"}, "password": {"p"}}
	bearer := url.Values{"name": {"ok"}, "url": {"http://127.0.0.1:1"}, "auth": {"bearer"}, "token": {"t"}}
	quota := url.Values{"namespace": {"team"}, "instances": {"1"}, "bindings": {"1"}, "plans": {""}, "default": {"false"}, "paid": {"true"}}
	for _, tc := range []struct {
		path  string
		form  url.Values
		field string
		// shown is the id of the element that shows the problem, or ""
		// when the page's sentence names the field.
		shown string
		// unstorableOnly: a long value is no problem of this field's own
		// (it is refused otherwise: a token that is none is a 401).
		unstorableOnly bool
	}{
		{"/login", url.Values{"token": {"x"}, "next": {"/"}}, "next", "", true},
		{"/logout", url.Values{"note": {"x"}}, "note", "", true},
		{"/brokers", basic, "name", "b-name-error", false},
		{"/brokers", basic, "namespace", "b-namespace-error", false},
		{"/brokers", basic, "url", "b-url-error", false},
		{"/brokers", basic, "auth", "b-auth-error", false},
		{"/brokers", basic, "username", "b-user-error", false},
		{"/brokers", basic, "password", "b-pass-error", false},
		{"/brokers", bearer, "token", "b-token-error", false},
		{broker + "/delete", url.Values{"confirm": {"fake"}}, "confirm", "confirm-error", false},
		{"/instances", url.Values{"plan": {b.plan.ID}, "name": {"ok"}, "namespace": {"default"}}, "name", "f-name-error", false},
		{"/instances", url.Values{"plan": {b.plan.ID}, "name": {"ok"}, "namespace": {"default"}}, "namespace", "f-namespace-error", false},
		{in, url.Values{"plan": {b.plan.ID}}, "plan", "f-plan-error", false},
		{in + "/delete", url.Values{"confirm": {"target"}}, "confirm", "confirm-error", false},
		{in + "/abandon", url.Values{"confirm": {"target"}}, "confirm", "confirm-error", false},
		{in + "/bindings", url.Values{"name": {"ok"}}, "name", "bind-name-error", false},
		{binding + "/delete", url.Values{"confirm": {"target-app"}}, "confirm", "confirm-error", false},
		{binding + "/abandon", url.Values{"confirm": {"target-app"}}, "confirm", "confirm-error", false},
		{"/quotas", quota, "namespace", "q-namespace-error", false},
		{"/quotas", quota, "instances", "q-instances-error", false},
		{"/quotas", quota, "bindings", "q-bindings-error", false},
		{"/quotas", quota, "plans", "q-plans-error", false},
		{"/quotas", quota, "default", "", false},
		{"/quotas", quota, "paid", "", false},
		{"/quotas/delete", url.Values{"namespace": {"team"}}, "namespace", "", false},
	} {
		for _, v := range []string{"a\x00b", "a\xffb", strings.Repeat("x", 100_000)} {
			long := len(v) > 3
			if long && tc.unstorableOnly {
				continue
			}
			form := url.Values{}
			for k, vs := range tc.form {
				form[k] = vs
			}
			form.Set(tc.field, v)
			res := b.admin.post(tc.path, form)
			page := body(t, res)
			named := strings.Contains(page, `id="`+tc.shown+`"`)
			if tc.shown == "" {
				named = strings.Contains(page, "&#34;"+tc.field+"&#34;") || strings.Contains(page, tc.field+": ") ||
					strings.Contains(page, "The "+tc.field+" ") || strings.Contains(page, "The namespace &#34;")
			}
			if res.StatusCode != http.StatusBadRequest || !named {
				t.Errorf("POST %s with %s of %d bytes: %d, named %v; want 400 naming %s", tc.path, tc.field, len(v), res.StatusCode, named, tc.field)
			}
		}
	}
	// Without the CSRF token, or with one that is not the session's.
	for _, path := range []string{"/login", "/logout", "/brokers", broker + "/relist", broker + "/delete", "/instances", in, in + "/delete",
		in + "/abandon", in + "/bindings", binding + "/reveal", binding + "/delete", binding + "/abandon", "/quotas", "/quotas/delete"} {
		for _, token := range []string{"", "forged"} {
			form := url.Values{"confirm": {"x"}, "name": {"x"}}
			if token != "" {
				form.Set(csrf.FieldName, token)
			}
			res, err := b.admin.http.Post(b.url+path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			if page := body(t, res); res.StatusCode != http.StatusForbidden || page == "" {
				t.Errorf("POST %s with CSRF token %q: %d, want 403 with a page", path, token, res.StatusCode)
			}
		}
	}
	if l, _ := b.store.ListInstances(t.Context(), catalog.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("%d instances", len(l.Items))
	}
	if l, _ := b.store.ListBrokers(t.Context(), catalog.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("%d brokers", len(l.Items))
	}
	if _, err := b.store.GetQuota(t.Context(), "team"); err == nil {
		t.Errorf("a refused quota was set")
	}
}
