package web_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/pgtext"
	"github.com/bindery-dev/bindery/web/csrf"
)

// fuzzRoute is a request the fuzzer puts a field (or a query or path
// parameter) of its own into.
type fuzzRoute struct {
	method, path string
	// form is the rest of the form; into says where the fuzzed text goes:
	// "form", "multipart", "query", or "path" (the path ends with the
	// text, escaped).
	form func(*inputBundle) url.Values
	into string
}

var fuzzRoutes = []fuzzRoute{
	{"GET", "/", nil, "query"},
	{"GET", "/instances", nil, "query"},
	{"GET", "/bindings", nil, "query"},
	{"GET", "/live/instances", nil, "query"},
	{"GET", "/login", nil, "query"},
	{"GET", "/instances/new", func(b *inputBundle) url.Values { return url.Values{"plan": {b.plan.ID}} }, "query"},
	{"GET", "/plans/", nil, "path"},
	{"GET", "/instances/", nil, "path"},
	{"GET", "/bindings/", nil, "path"},
	{"GET", "/brokers/", nil, "path"},
	{"POST", "/login", func(*inputBundle) url.Values { return url.Values{"token": {"bdy_wrong"}} }, "form"},
	{"POST", "/instances", func(b *inputBundle) url.Values {
		return url.Values{"plan": {b.plan.ID}, "name": {"fuzzed"}, "spec.parameters.size": {"2"}}
	}, "form"},
	{"POST", "/instances", func(b *inputBundle) url.Values { return url.Values{"plan": {b.plan.ID}, "name": {"fuzzed"}} }, "multipart"},
	{"POST", "/instances/{in}", func(*inputBundle) url.Values { return url.Values{"spec.parameters.size": {"3"}} }, "form"},
	{"POST", "/instances/{in}/bindings", func(*inputBundle) url.Values { return url.Values{"name": {"fuzzed"}} }, "form"},
	{"POST", "/instances/{in}/delete", func(*inputBundle) url.Values { return url.Values{"confirm": {"not-it"}} }, "form"},
	{"POST", "/bindings/{binding}/reveal", nil, "form"},
	{"POST", "/bindings/{binding}/delete", func(*inputBundle) url.Values { return url.Values{"confirm": {"not-it"}} }, "form"},
	{"POST", "/brokers", func(*inputBundle) url.Values {
		return url.Values{"name": {"fuzzed"}, "url": {"http://127.0.0.1:1"}, "auth": {"none"}}
	}, "form"},
	{"POST", "/brokers/{broker}/relist", nil, "form"},
	{"GET", "/brokers/{broker}/events", nil, "query"},
	{"GET", "/plans/{plan}", nil, "query"},
	{"GET", "/instances/new", func(b *inputBundle) url.Values { return url.Values{"plan": {b.plan.ID}, "namespace": {"team-a"}} }, "query"},
}

// FuzzWebInput sends the web UI's forms and pages a field (or query or
// path parameter) of the fuzzer's with every decoder of the UI in the way:
// form and multipart parsing, the query string, path parameters, the
// generated parameter forms, the delete confirmations. No answer is a 5xx;
// text PostgreSQL cannot hold is a 400 (a forged CSRF field a 403).
//
//	go test ./web -run '^$' -fuzz FuzzWebInput -fuzztime 60s
func FuzzWebInput(f *testing.F) {
	for i := range fuzzRoutes {
		for _, kv := range [][2]string{
			{"name", "a\x00b"}, {"name", "\xff"}, {"namespace", "team\x00"}, {"spec.parameters.size", "1e999"},
			{"spec.parameters.region", "\xc3\x28"}, {"q", "%"}, {"", ""}, {"continue", "not-a-token"},
			{"limit", "-1"}, {"confirm", "target"}, {"x\x00", "1"}, {"spec.parameters.size~", "7"}, {"plan", "../../etc"},
			{"namespace", "Team_A"}, {"namespace", "team-b"}, {"broker", "team-a/x"},
		} {
			f.Add(uint8(i), kv[0], kv[1])
		}
	}
	b := inputSetup(f)
	f.Fuzz(func(t *testing.T, route uint8, key, value string) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		if r.path == "/brokers" && key == "url" && pgtext.Problem(value) == "" {
			t.Skip("a broker's URL is called: only unstorable URLs, which are never called")
		}
		path := strings.NewReplacer("{in}", b.in.ID, "{binding}", b.binding.ID, "{broker}", b.broker.ID, "{plan}", b.plan.ID).Replace(r.path)
		form := url.Values{}
		if r.form != nil {
			form = r.form(b)
		}
		var req *http.Request
		var sent []byte
		switch r.into {
		case "query":
			form.Set(key, value)
			req, _ = http.NewRequest(r.method, b.url+path+"?"+form.Encode(), nil)
		case "path":
			req, _ = http.NewRequest(r.method, b.url+path+url.PathEscape(value), nil)
		case "form":
			form.Set(csrf.FieldName, b.admin.csrf())
			form.Set(key, value)
			sent = []byte(form.Encode())
			req, _ = http.NewRequest(r.method, b.url+path, bytes.NewReader(sent))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		case "multipart":
			form.Set(csrf.FieldName, b.admin.csrf())
			form.Set(key, value)
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			for k, vs := range form {
				for _, v := range vs {
					_ = mw.WriteField(k, v)
				}
			}
			_ = mw.Close()
			sent = buf.Bytes()
			req, _ = http.NewRequest(r.method, b.url+path, bytes.NewReader(sent))
			req.Header.Set("Content-Type", mw.FormDataContentType())
		}
		if req == nil {
			t.Skip("not a request")
		}
		// What the server reads, read the same way: parsers drop some
		// fields (an empty name, for one), which then never reach it.
		unstorable := false
		if r.into == "path" {
			// The router hands on a path parameter unescaped only when the
			// path is escaped the default way (no RawPath); otherwise as
			// escaped, storable text.
			unstorable = req.URL.RawPath == "" && pgtext.Problem(value) != ""
		} else {
			view := req.Clone(context.Background())
			view.Body = io.NopCloser(bytes.NewReader(sent))
			// (A form that cannot be parsed is refused, 400, like any.)
			_ = view.ParseMultipartForm(1 << 20)
			for k, vs := range view.Form {
				unstorable = unstorable || pgtext.Problem(k) != ""
				for _, v := range vs {
					unstorable = unstorable || pgtext.Problem(v) != ""
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := b.admin.http.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, path, err)
		}
		defer res.Body.Close()
		if res.Header.Get("Content-Type") != "text/event-stream" {
			_, _ = io.Copy(io.Discard, res.Body)
		}
		if res.StatusCode >= 500 {
			t.Fatalf("%s %s with %q=%q: %d", r.method, path, key, value, res.StatusCode)
		}
		csrfField := key == csrf.FieldName && r.into != "query" && r.into != "path"
		if unstorable && !csrfField && res.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s %s with %q=%q: %d, want 400", r.method, path, key, value, res.StatusCode)
		}
	})
}
