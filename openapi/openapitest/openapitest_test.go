package openapitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/bindery-dev/bindery/openapi/openapitest"
)

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

const broker = `{"id":"0b5f3c2e-0000-4000-8000-000000000001","name":"b","generation":1,"resourceVersion":3,` +
	`"creationTimestamp":"2026-01-02T03:04:05Z","spec":{"url":"http://x","relistBehavior":"Duration"},` +
	`"status":{"serviceClassCount":0,"servicePlanCount":0}}`

func TestTransport(t *testing.T) {
	t.Parallel()
	// The server answers what the test says, and echoes the request body
	// it read into a header.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Body", string(body))
		w.Header().Set("Content-Type", "application/json")
		status := http.StatusOK
		fmt.Sscan(r.Header.Get("X-Status"), &status)
		w.WriteHeader(status)
		io.WriteString(w, r.Header.Get("X-Answer"))
	}))
	t.Cleanup(srv.Close)

	tests := []struct {
		name, method, path, body string
		status                   int
		answer                   string
		errors                   []string // what the reports contain, in order
		skipped                  bool
	}{
		{name: "good", method: "GET", path: "/brokers/b", status: 200, answer: broker},
		{name: "good create", method: "POST", path: "/brokers", body: `{"name":"b","url":"http://x"}`, status: 201, answer: broker},
		{name: "good error", method: "GET", path: "/brokers/b", status: 404, answer: `{"error":"not_found","message":"broker \"b\" does not exist"}`},
		{name: "undocumented status", method: "GET", path: "/brokers/b", status: 418, answer: `{}`,
			errors: []string{"GET /api/v1/brokers/b → 418", "status is not supported"}},
		{name: "extra field", method: "GET", path: "/brokers/b", status: 200, answer: strings.Replace(broker, `"name"`, `"colour":"red","name"`, 1),
			errors: []string{"does not match the document", `property "colour" is unsupported`}},
		{name: "null body", method: "DELETE", path: "/bindings/x", status: 202, answer: "null",
			errors: []string{"DELETE /api/v1/bindings/x → 202"}},
		{name: "bad request refused", method: "POST", path: "/brokers", body: `{"name":"b"}`, status: 400,
			answer: `{"error":"invalid","message":"spec.url: required","field":"spec.url"}`},
		{name: "bad request accepted", method: "POST", path: "/brokers", body: `{"name":"b"}`, status: 201, answer: broker,
			errors: []string{"POST /api/v1/brokers → 201", "accepted a request the document refuses", `property "url" is missing`}},
		{name: "unknown path", method: "GET", path: "/nothing", status: 404, answer: `{}`, skipped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			v := openapitest.Transport(rec, srv.Client().Transport)
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequest(tt.method, srv.URL+"/api/v1"+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Status", fmt.Sprint(tt.status))
			req.Header.Set("X-Answer", tt.answer)
			res, err := (&http.Client{Transport: v}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			got, _ := io.ReadAll(res.Body)
			if string(got) != tt.answer {
				t.Errorf("the caller read %q, want %q", got, tt.answer)
			}
			if res.Header.Get("X-Body") != tt.body {
				t.Errorf("the server read %q, want %q", res.Header.Get("X-Body"), tt.body)
			}
			switch {
			case tt.skipped && (v.Skipped() != 1 || v.Count() != 0):
				t.Errorf("skipped %d, validated %d; want 1 and 0", v.Skipped(), v.Count())
			case !tt.skipped && (v.Skipped() != 0 || v.Count() != 1):
				t.Errorf("skipped %d, validated %d; want 0 and 1", v.Skipped(), v.Count())
			}
			report := strings.Join(rec.errs, "\n")
			if len(tt.errors) == 0 && report != "" {
				t.Errorf("reported:\n%s", report)
			}
			if report != "" {
				t.Logf("reported:\n%s", report)
			}
			for _, want := range tt.errors {
				if !strings.Contains(report, want) {
					t.Errorf("the report does not say %q:\n%s", want, report)
				}
			}
		})
	}
}
