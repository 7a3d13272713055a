package osbtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
)

// client calls a Broker the way a platform does.
type client struct {
	t      *testing.T
	b      *Broker
	http   *http.Client
	header http.Header
}

// result is a broker's answer.
type result struct {
	status int
	header http.Header
	body   []byte
}

// object decodes the answer as a JSON object, failing the test otherwise.
func (r result) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d %q is not a JSON object: %v", r.status, r.body, err)
	}
	return m
}

func setup(t *testing.T, opts ...Option) (*Broker, *client) {
	t.Helper()
	b := New(t, opts...)
	h := http.Header{}
	h.Set("X-Broker-API-Version", "2.17")
	return b, &client{t: t, b: b, http: b.Client(), header: h}
}

// do sends a request; body, unless nil, is encoded as JSON.
func (c *client) do(method, path string, body any) result {
	c.t.Helper()
	res, err := c.try(method, path, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return res
}

func (c *client) try(method, path string, body any) (result, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return result{}, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.b.URL()+path, r)
	if err != nil {
		return result{}, err
	}
	req.Header = c.header.Clone()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: data}, err
}

// expect checks an answer's status and, if code is not empty, its OSB
// error code.
func expect(t *testing.T, r result, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if code != "" {
		if got := r.object(t)["error"]; got != code {
			t.Fatalf("error %v, want %s; body %s", got, code, r.body)
		}
	}
}

func provisionBody(serviceID, planID string, params map[string]any) map[string]any {
	return map[string]any{
		"service_id": serviceID, "plan_id": planID,
		"organization_guid": "org", "space_guid": "space",
		"context":    map[string]any{"platform": "kubernetes", "namespace": "demo"},
		"parameters": params,
	}
}

// instancePath is the instance's path with the hint query parameters.
func instancePath(id, serviceID, planID string, async bool) string {
	return fmt.Sprintf("/v2/service_instances/%s?%s", id, url.Values{
		"service_id": {serviceID}, "plan_id": {planID}, "accepts_incomplete": {fmt.Sprint(async)},
	}.Encode())
}

func bindingPath(instanceID, id, serviceID, planID string, async bool) string {
	return fmt.Sprintf("/v2/service_instances/%s/service_bindings/%s?%s", instanceID, id, url.Values{
		"service_id": {serviceID}, "plan_id": {planID}, "accepts_incomplete": {fmt.Sprint(async)},
	}.Encode())
}

func pollPath(instanceID, operation string) string {
	p := "/v2/service_instances/" + instanceID + "/last_operation"
	if operation != "" {
		p += "?" + url.Values{"operation": {operation}}.Encode()
	}
	return p
}

func bindingPollPath(instanceID, bindingID, operation string) string {
	p := "/v2/service_instances/" + instanceID + "/service_bindings/" + bindingID + "/last_operation"
	if operation != "" {
		p += "?" + url.Values{"operation": {operation}}.Encode()
	}
	return p
}

func TestAuthenticationAndVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   []Option
		header map[string]string
		status int
		code   string
	}{
		{"no auth configured", nil, nil, 200, ""},
		{"basic ok", []Option{WithBasicAuth("u", "p")}, map[string]string{"Authorization": basic("u", "p")}, 200, ""},
		{"basic wrong", []Option{WithBasicAuth("u", "p")}, map[string]string{"Authorization": basic("u", "x")}, 401, "Unauthorized"},
		{"basic missing", []Option{WithBasicAuth("u", "p")}, nil, 401, "Unauthorized"},
		{"bearer ok", []Option{WithBearerToken("tok")}, map[string]string{"Authorization": "Bearer tok"}, 200, ""},
		{"bearer wrong", []Option{WithBearerToken("tok")}, map[string]string{"Authorization": "Bearer nope"}, 401, "Unauthorized"},
		{"bearer given basic", []Option{WithBearerToken("tok")}, map[string]string{"Authorization": basic("u", "p")}, 401, "Unauthorized"},
		{"either, bearer", []Option{WithBasicAuth("u", "p"), WithBearerToken("tok")}, map[string]string{"Authorization": "Bearer tok"}, 200, ""},
		{"401 before version", []Option{WithBasicAuth("u", "p")}, map[string]string{"X-Broker-API-Version": ""}, 401, "Unauthorized"},
		{"version missing", nil, map[string]string{"X-Broker-API-Version": ""}, 400, "BadRequest"},
		{"version 2.12", nil, map[string]string{"X-Broker-API-Version": "2.12"}, 412, "PreconditionFailed"},
		{"version 1.17", nil, map[string]string{"X-Broker-API-Version": "1.17"}, 412, "PreconditionFailed"},
		{"version garbage", nil, map[string]string{"X-Broker-API-Version": "latest"}, 412, "PreconditionFailed"},
		{"version 2.13", nil, map[string]string{"X-Broker-API-Version": "2.13"}, 200, ""},
		{"version 2.18", nil, map[string]string{"X-Broker-API-Version": "2.18"}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, c := setup(t, tt.opts...)
			for k, v := range tt.header {
				if v == "" {
					c.header.Del(k)
				} else {
					c.header.Set(k, v)
				}
			}
			res := c.do("GET", "/v2/catalog", nil)
			expect(t, res, tt.status, tt.code)
			if tt.status == 401 && res.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if got := b.Count(VerbCatalog); got != 1 {
				t.Errorf("Count(VerbCatalog) = %d, want 1: rejected requests count too", got)
			}
		})
	}
}

func basic(user, password string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, password)
	return r.Header.Get("Authorization")
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	b, c := setup(t, WithBasicAuth("user", "secret"))
	c.header.Set("Authorization", basic("user", "secret"))
	c.header.Set("X-Broker-API-Originating-Identity", "kubernetes eyJ1c2VybmFtZSI6ImFsaWNlIn0=")
	c.header.Set("X-Broker-API-Request-Identity", "req-1")
	sid, pid := b.IDs(DefaultService, PlanSync)
	res := c.do("PUT", "/v2/service_instances/i-1?accepts_incomplete=true", provisionBody(sid, pid, map[string]any{"a": 1}))
	expect(t, res, 201, "")
	if got := res.header.Get("X-Broker-API-Request-Identity"); got != "req-1" {
		t.Errorf("request identity echoed as %q", got)
	}
	c.do("GET", "/v2/nowhere", nil)

	reqs := b.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests logged, want 2", len(reqs))
	}
	r := reqs[0]
	if r.Verb != VerbProvision || r.Method != "PUT" || r.Path != "/v2/service_instances/i-1" ||
		r.RawQuery != "accepts_incomplete=true" || r.Query.Get("accepts_incomplete") != "true" {
		t.Errorf("logged %+v", r)
	}
	if r.APIVersion != "2.17" || r.RequestIdentity != "req-1" ||
		r.OriginatingIdentity != "kubernetes eyJ1c2VybmFtZSI6ImFsaWNlIn0=" || !r.Authorization {
		t.Errorf("logged headers %+v", r)
	}
	if r.Header.Get("Authorization") != "" || bytes.Contains(mustJSON(t, reqs), []byte("secret")) {
		t.Error("the request log keeps credentials")
	}
	if !bytes.Contains(r.Body, []byte(`"plan_id"`)) {
		t.Errorf("logged body %s", r.Body)
	}
	if reqs[1].Verb != VerbUnknown || b.Count(VerbUnknown) != 1 {
		t.Errorf("unknown path logged as %s", reqs[1].Verb)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCatalog(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	res := c.do("GET", "/v2/catalog", nil)
	expect(t, res, 200, "")
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var got struct {
		Services []Service `json:"services"`
	}
	if err := json.Unmarshal(res.body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Services) != 1 || got.Services[0].Name != DefaultService || len(got.Services[0].Plans) != 4 {
		t.Errorf("default catalog %s", res.body)
	}
	if bytes.Contains(res.body, []byte("async_required")) || bytes.Contains(res.body, []byte(`"Async"`)) {
		t.Errorf("catalog shows the fake's own settings: %s", res.body)
	}

	b.SetCatalog(GenerateCatalog(3, 2))
	if err := json.Unmarshal(c.do("GET", "/v2/catalog", nil).body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Services) != 3 || got.Services[2].Name != "fake-service-3" {
		t.Errorf("after SetCatalog: %+v", got.Services)
	}
	b.SetCatalog(nil)
	if body := string(c.do("GET", "/v2/catalog", nil).body); body != `{"services":[]}` {
		t.Errorf("empty catalog is %s", body)
	}
}

func TestGenerateCatalog(t *testing.T) {
	t.Parallel()
	services := GenerateCatalog(100, 10)
	cliFriendly := regexp.MustCompile(`^[a-zA-Z0-9.-]+$`)
	guid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	ids := map[string]bool{}
	names := map[string]bool{}
	plans := 0
	for _, s := range services {
		if ids[s.ID] || !guid.MatchString(s.ID) || names[s.Name] || !cliFriendly.MatchString(s.Name) || s.Description == "" {
			t.Fatalf("bad service %+v", s)
		}
		ids[s.ID], names[s.Name] = true, true
		planNames := map[string]bool{}
		for _, p := range s.Plans {
			plans++
			if ids[p.ID] || !guid.MatchString(p.ID) || planNames[p.Name] || !cliFriendly.MatchString(p.Name) || p.Description == "" {
				t.Fatalf("bad plan %+v", p)
			}
			ids[p.ID], planNames[p.Name] = true, true
			schema := p.Schemas.ServiceInstance.Create.Parameters
			if schema["$schema"] == nil || p.Schemas.ServiceBinding.Create.Parameters["type"] != "object" {
				t.Fatalf("plan %s schemas %+v", p.Name, p.Schemas)
			}
			if p.MaintenanceInfo == nil || p.MaintenanceInfo.Version == "" {
				t.Fatalf("plan %s has no maintenance_info", p.Name)
			}
		}
	}
	if len(services) != 100 || plans != 1000 {
		t.Errorf("%d services, %d plans", len(services), plans)
	}
	// Every plan's schema is its own.
	services[0].Plans[0].Schemas.ServiceInstance.Create.Parameters["x"] = 1
	if _, shared := services[0].Plans[1].Schemas.ServiceInstance.Create.Parameters["x"]; shared {
		t.Error("plans share schema maps")
	}
}

func TestProvisionSync(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, pid := b.IDs(DefaultService, PlanSync)
	_, otherPlan := b.IDs(DefaultService, PlanAsync)
	_, onlyAsync := b.IDs(DefaultService, PlanAsyncOnly)
	path := "/v2/service_instances/i-1"
	params := map[string]any{"size": 1}

	expect(t, c.do("PUT", path, provisionBody(sid, pid, params)), 201, "")
	tests := []struct {
		name   string
		path   string
		body   any
		status int
		code   string
	}{
		{"identical", path, provisionBody(sid, pid, params), 200, ""},
		{"identical, accepts incomplete", path + "?accepts_incomplete=true", provisionBody(sid, pid, params), 200, ""},
		{"other parameters", path, provisionBody(sid, pid, map[string]any{"size": 2}), 409, ""},
		{"other plan", path, provisionBody(sid, otherPlan, params), 409, ""},
		{"missing fields", "/v2/service_instances/i-2", map[string]any{"service_id": sid}, 400, "BadRequest"},
		{"unknown plan", "/v2/service_instances/i-2", provisionBody(sid, "nope", nil), 400, "BadRequest"},
		{"not an object", "/v2/service_instances/i-2", []int{1}, 400, "BadRequest"},
		{"bad accepts_incomplete", "/v2/service_instances/i-2?accepts_incomplete=maybe", provisionBody(sid, pid, nil), 400, "BadRequest"},
		{"async-only plan", "/v2/service_instances/i-2", provisionBody(sid, onlyAsync, nil), 422, "AsyncRequired"},
		{"maintenance_info conflict", "/v2/service_instances/i-2", withMaintenance(provisionBody(sid, pid, nil), "9.9.9"), 422, "MaintenanceInfoConflict"},
	}
	for _, tt := range tests {
		expect(t, c.do("PUT", tt.path, tt.body), tt.status, tt.code)
	}
	in := b.Instances()
	if len(in) != 1 || in[0].ID != "i-1" || in[0].State != StateReady || in[0].Parameters["size"] != 1.0 ||
		in[0].Context["namespace"] != "demo" || in[0].Operation != "" {
		t.Errorf("instances %+v", in)
	}

	res := c.do("GET", path, nil)
	expect(t, res, 200, "")
	if got := res.object(t); got["plan_id"] != pid || got["service_id"] != sid {
		t.Errorf("fetched %s", res.body)
	}
	expect(t, c.do("GET", "/v2/service_instances/i-9", nil), 404, "")

	expect(t, c.do("DELETE", instancePath("i-1", sid, pid, false), nil), 200, "")
	expect(t, c.do("DELETE", instancePath("i-1", sid, pid, false), nil), 410, "")
	expect(t, c.do("DELETE", "/v2/service_instances/i-1", nil), 400, "BadRequest")
	if in := b.Instances(); len(in) != 0 {
		t.Errorf("instances left: %+v", in)
	}
}

func withMaintenance(body map[string]any, version string) map[string]any {
	body["maintenance_info"] = map[string]any{"version": version}
	return body
}

func TestProvisionAsync(t *testing.T) {
	t.Parallel()
	b, c := setup(t, WithPolls(2), WithRetryAfter(1500*time.Millisecond))
	sid, pid := b.IDs(DefaultService, PlanAsync)
	path := "/v2/service_instances/i-1?accepts_incomplete=true"

	res := c.do("PUT", path, provisionBody(sid, pid, nil))
	expect(t, res, 202, "")
	op, _ := res.object(t)["operation"].(string)
	if op == "" {
		t.Fatalf("202 without operation: %s", res.body)
	}
	// A re-sent PUT gets 202 with the same operation; without
	// accepts_incomplete it cannot.
	if again := c.do("PUT", path, provisionBody(sid, pid, nil)); again.status != 202 || again.object(t)["operation"] != op {
		t.Errorf("re-sent PUT: %d %s", again.status, again.body)
	}
	expect(t, c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil)), 422, "ConcurrencyError")
	expect(t, c.do("GET", "/v2/service_instances/i-1", nil), 404, "")
	if in := b.Instances(); len(in) != 1 || in[0].State != StateCreating || in[0].Operation != op {
		t.Errorf("instances %+v", in)
	}

	for i := range 2 {
		res := c.do("GET", pollPath("i-1", op), nil)
		expect(t, res, 200, "")
		if got := res.object(t)["state"]; got != "in progress" {
			t.Fatalf("poll %d: %s", i+1, res.body)
		}
		if got := res.header.Get("Retry-After"); got != "2" {
			t.Errorf("Retry-After %q, want 2", got)
		}
	}
	res = c.do("GET", pollPath("i-1", op), nil)
	if res.object(t)["state"] != "succeeded" || res.header.Get("Retry-After") != "" {
		t.Fatalf("third poll: %s %v", res.body, res.header)
	}
	// The broker remembers the outcome.
	if res := c.do("GET", pollPath("i-1", ""), nil); res.object(t)["state"] != "succeeded" {
		t.Errorf("poll without operation: %s", res.body)
	}
	expect(t, c.do("GET", pollPath("i-1", "op-999"), nil), 400, "")
	expect(t, c.do("GET", "/v2/service_instances/i-1/last_operation?operation=", nil), 400, "")
	expect(t, c.do("GET", pollPath("i-9", ""), nil), 404, "")
	expect(t, c.do("GET", "/v2/service_instances/i-1", nil), 200, "")
	expect(t, c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil)), 200, "")

	// Asynchronous deprovision, then 410 Gone.
	res = c.do("DELETE", instancePath("i-1", sid, pid, true), nil)
	expect(t, res, 202, "")
	del := res.object(t)["operation"].(string)
	if del == op {
		t.Error("deprovision reuses the provision's operation id")
	}
	if again := c.do("DELETE", instancePath("i-1", sid, pid, true), nil); again.status != 202 || again.object(t)["operation"] != del {
		t.Errorf("re-sent DELETE: %d %s", again.status, again.body)
	}
	for range 2 {
		c.do("GET", pollPath("i-1", del), nil)
	}
	if res := c.do("GET", pollPath("i-1", del), nil); res.object(t)["state"] != "succeeded" {
		t.Errorf("finishing poll: %s", res.body)
	}
	expect(t, c.do("GET", pollPath("i-1", del), nil), 410, "")
	expect(t, c.do("DELETE", instancePath("i-1", sid, pid, true), nil), 410, "")
	if in := b.Instances(); len(in) != 0 {
		t.Errorf("instances left: %+v", in)
	}
}

func TestGoneOnDelete(t *testing.T) {
	t.Parallel()
	b, c := setup(t, WithAsync(), WithPolls(0), WithGoneOnDelete())
	sid, pid := b.IDs(DefaultService, PlanSync)
	c.do("PUT", "/v2/service_instances/i-1?accepts_incomplete=true", provisionBody(sid, pid, nil))
	c.do("GET", pollPath("i-1", ""), nil)
	c.do("PUT", "/v2/service_instances/i-1/service_bindings/b-1?accepts_incomplete=true", map[string]any{"service_id": sid, "plan_id": pid})
	c.do("GET", bindingPollPath("i-1", "b-1", ""), nil)

	expect(t, c.do("DELETE", bindingPath("i-1", "b-1", sid, pid, true), nil), 202, "")
	expect(t, c.do("GET", bindingPollPath("i-1", "b-1", ""), nil), 410, "")
	expect(t, c.do("DELETE", instancePath("i-1", sid, pid, true), nil), 202, "")
	expect(t, c.do("GET", pollPath("i-1", ""), nil), 410, "")
	if len(b.Instances())+len(b.Bindings()) != 0 {
		t.Error("resources left")
	}
}

func TestDeprovisionHaltsProvision(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, pid := b.IDs(DefaultService, PlanAsync)
	res := c.do("PUT", "/v2/service_instances/i-1?accepts_incomplete=true", provisionBody(sid, pid, nil))
	op := res.object(t)["operation"].(string)
	expect(t, c.do("DELETE", instancePath("i-1", sid, pid, false), nil), 200, "")
	if res := c.do("GET", pollPath("i-1", op), nil); res.object(t)["state"] != "failed" {
		t.Errorf("poll of a halted provision: %s", res.body)
	}
	if in := b.Instances(); len(in) != 0 {
		t.Errorf("instances left: %+v", in)
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, small := b.IDs(DefaultService, PlanSync)
	_, async := b.IDs(DefaultService, PlanAsync)
	_, fixed := b.IDs(DefaultService, PlanFixed)
	c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, small, map[string]any{"a": 1, "b": 1}))
	c.do("PUT", "/v2/service_instances/i-2", provisionBody(sid, fixed, nil))

	expect(t, c.do("PATCH", "/v2/service_instances/i-1", map[string]any{"service_id": sid, "parameters": map[string]any{"b": 2}}), 200, "")
	if in := b.Instances()[0]; in.Parameters["a"] != 1.0 || in.Parameters["b"] != 2.0 {
		t.Errorf("parameters after update %v, want merged", in.Parameters)
	}
	tests := []struct {
		name   string
		id     string
		body   map[string]any
		status int
		code   string
	}{
		{"no service_id", "i-1", map[string]any{}, 400, "BadRequest"},
		{"unknown instance", "i-9", map[string]any{"service_id": sid}, 404, ""},
		{"unknown plan", "i-1", map[string]any{"service_id": sid, "plan_id": "nope"}, 400, "BadRequest"},
		{"plan not updateable", "i-2", map[string]any{"service_id": sid, "plan_id": small}, 422, "PlanChangeNotSupported"},
		{"maintenance conflict", "i-1", map[string]any{"service_id": sid, "maintenance_info": map[string]any{"version": "2.0.0"}}, 422, "MaintenanceInfoConflict"},
		{"context only", "i-1", map[string]any{"service_id": sid, "context": map[string]any{"platform": "kubernetes"}}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, c.do("PATCH", "/v2/service_instances/"+tt.id, tt.body), tt.status, tt.code)
		})
	}
	res := c.do("PATCH", "/v2/service_instances/i-2", map[string]any{"service_id": sid, "plan_id": small})
	if res.object(t)["update_repeatable"] != false {
		t.Errorf("PlanChangeNotSupported body %s", res.body)
	}

	// An asynchronous plan change applies when the operation succeeds.
	change := map[string]any{"service_id": sid, "plan_id": async, "parameters": map[string]any{"c": 3}}
	res = c.do("PATCH", "/v2/service_instances/i-1?accepts_incomplete=true", change)
	expect(t, res, 202, "")
	op := res.object(t)["operation"].(string)
	if again := c.do("PATCH", "/v2/service_instances/i-1?accepts_incomplete=true", change); again.status != 202 || again.object(t)["operation"] != op {
		t.Errorf("re-sent PATCH: %d %s", again.status, again.body)
	}
	expect(t, c.do("PATCH", "/v2/service_instances/i-1?accepts_incomplete=true", map[string]any{"service_id": sid}), 422, "ConcurrencyError")
	expect(t, c.do("GET", "/v2/service_instances/i-1", nil), 422, "ConcurrencyError")
	expect(t, c.do("DELETE", instancePath("i-1", sid, small, true), nil), 422, "ConcurrencyError")
	if in := b.Instances()[0]; in.PlanID != small || in.State != StateUpdating {
		t.Errorf("instance during the update: %+v", in)
	}
	if res := c.do("GET", pollPath("i-1", op), nil); res.object(t)["state"] != "in progress" {
		t.Fatalf("first poll: %s", res.body)
	}
	if res := c.do("GET", pollPath("i-1", op), nil); res.object(t)["state"] != "succeeded" {
		t.Fatalf("second poll: %s", res.body)
	}
	if in := b.Instances()[0]; in.PlanID != async || in.State != StateReady || in.Parameters["c"] != 3.0 || in.Parameters["a"] != 1.0 {
		t.Errorf("instance after the update: %+v", in)
	}
}

func TestBinding(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, pid := b.IDs(DefaultService, PlanSync)
	c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil))
	path := "/v2/service_instances/i-1/service_bindings/b-1"
	body := map[string]any{"service_id": sid, "plan_id": pid, "bind_resource": map[string]any{"app_guid": "app"}, "parameters": map[string]any{"role": "ro"}}

	res := c.do("PUT", path, body)
	expect(t, res, 201, "")
	got := res.object(t)
	creds, _ := got["credentials"].(map[string]any)
	if creds["password"] == nil || creds["uri"] == nil {
		t.Errorf("credentials %v", creds)
	}
	if eps, _ := got["endpoints"].([]any); len(eps) != 1 {
		t.Errorf("endpoints %v", got["endpoints"])
	}
	bd := b.Bindings()
	if len(bd) != 1 || bd[0].AppGUID != "app" || bd[0].State != StateReady || bd[0].Credentials["password"] != creds["password"] {
		t.Errorf("bindings %+v", bd)
	}
	if again := c.do("PUT", path, body); again.status != 200 || again.object(t)["credentials"].(map[string]any)["password"] != creds["password"] {
		t.Errorf("identical bind: %d %s", again.status, again.body)
	}
	other := map[string]any{"service_id": sid, "plan_id": pid, "parameters": map[string]any{"role": "rw"}}
	expect(t, c.do("PUT", path, other), 409, "")
	expect(t, c.do("PUT", "/v2/service_instances/i-9/service_bindings/b-1", body), 404, "")
	expect(t, c.do("PUT", "/v2/service_instances/i-1/service_bindings/b-2", map[string]any{"plan_id": pid}), 400, "BadRequest")

	res = c.do("GET", path, nil)
	expect(t, res, 200, "")
	if res.object(t)["parameters"].(map[string]any)["role"] != "ro" {
		t.Errorf("fetched %s", res.body)
	}
	expect(t, c.do("GET", "/v2/service_instances/i-1/service_bindings/b-9", nil), 404, "")

	expect(t, c.do("DELETE", bindingPath("i-1", "b-1", sid, pid, false), nil), 200, "")
	expect(t, c.do("DELETE", bindingPath("i-1", "b-1", sid, pid, false), nil), 410, "")
	expect(t, c.do("DELETE", path, nil), 400, "BadRequest")
	if bd := b.Bindings(); len(bd) != 0 {
		t.Errorf("bindings left: %+v", bd)
	}
}

func TestBindingAsync(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, pid := b.IDs(DefaultService, PlanAsync)
	_, onlyAsync := b.IDs(DefaultService, PlanAsyncOnly)
	c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil))
	c.do("PUT", "/v2/service_instances/i-2?accepts_incomplete=true", provisionBody(sid, onlyAsync, nil))
	c.do("GET", pollPath("i-2", ""), nil)
	c.do("GET", pollPath("i-2", ""), nil)
	expect(t, c.do("PUT", "/v2/service_instances/i-2/service_bindings/b-1", map[string]any{"service_id": sid, "plan_id": onlyAsync}), 422, "AsyncRequired")

	path := "/v2/service_instances/i-1/service_bindings/b-1?accepts_incomplete=true"
	body := map[string]any{"service_id": sid, "plan_id": pid}
	res := c.do("PUT", path, body)
	expect(t, res, 202, "")
	if _, ok := res.object(t)["credentials"]; ok {
		t.Error("202 carries credentials")
	}
	op := res.object(t)["operation"].(string)
	expect(t, c.do("GET", "/v2/service_instances/i-1/service_bindings/b-1", nil), 404, "")
	res = c.do("GET", bindingPollPath("i-1", "b-1", op), nil)
	if res.object(t)["state"] != "in progress" || res.header.Get("Retry-After") != "1" {
		t.Fatalf("first poll: %s %v", res.body, res.header)
	}
	if res := c.do("GET", bindingPollPath("i-1", "b-1", op), nil); res.object(t)["state"] != "succeeded" {
		t.Fatalf("second poll: %s", res.body)
	}
	res = c.do("GET", "/v2/service_instances/i-1/service_bindings/b-1", nil)
	expect(t, res, 200, "")
	if _, ok := res.object(t)["credentials"]; !ok {
		t.Errorf("fetched binding without credentials: %s", res.body)
	}

	res = c.do("DELETE", bindingPath("i-1", "b-1", sid, pid, true), nil)
	expect(t, res, 202, "")
	unbind := res.object(t)["operation"].(string)
	c.do("GET", bindingPollPath("i-1", "b-1", unbind), nil)
	if res := c.do("GET", bindingPollPath("i-1", "b-1", unbind), nil); res.object(t)["state"] != "succeeded" {
		t.Fatalf("unbind poll: %s", res.body)
	}
	expect(t, c.do("GET", bindingPollPath("i-1", "b-1", unbind), nil), 410, "")
	expect(t, c.do("GET", bindingPollPath("i-1", "b-9", ""), nil), 404, "")
	if bd := b.Bindings(); len(bd) != 0 {
		t.Errorf("bindings left: %+v", bd)
	}
}

func TestBindingRotation(t *testing.T) {
	t.Parallel()
	services := DefaultCatalog()
	services[0].Plans[0].BindingRotatable = true
	b, c := setup(t, WithCatalog(services))
	sid, pid := b.IDs(DefaultService, PlanSync)
	c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil))
	c.do("PUT", "/v2/service_instances/i-1/service_bindings/b-1", map[string]any{"service_id": sid, "plan_id": pid, "parameters": map[string]any{"x": 1}})

	res := c.do("PUT", "/v2/service_instances/i-1/service_bindings/b-2", map[string]any{"predecessor_binding_id": "b-1"})
	expect(t, res, 201, "")
	bd := b.Bindings()
	if len(bd) != 2 || bd[1].Parameters["x"] != 1.0 || bd[0].Credentials["password"] == bd[1].Credentials["password"] {
		t.Errorf("after rotation: %+v", bd)
	}
	expect(t, c.do("PUT", "/v2/service_instances/i-1/service_bindings/b-3", map[string]any{"predecessor_binding_id": "b-9"}), 400, "BadRequest")
}

func TestFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		verb    Verb
		failure Failure
		status  int
		code    string
		body    string // exact body, when not empty
		created bool   // whether the request was carried out
	}{
		{"500", VerbProvision, Failure{Status: 500}, 500, "", "", false},
		{"500 with a body", VerbProvision, Failure{Status: 500, Body: "boom"}, 500, "", "boom", false},
		{"408", VerbProvision, Failure{Status: 408}, 408, "", "", false},
		{"422 ConcurrencyError", VerbProvision, Failure{Status: 422, Code: "ConcurrencyError"}, 422, "ConcurrencyError", "", false},
		{"422 AsyncRequired", VerbProvision, Failure{Status: 422, Code: "AsyncRequired"}, 422, "AsyncRequired", "", false},
		{"201 with malformed response", VerbProvision, Failure{Status: 201, Body: "{"}, 201, "", "{", true},
		{"200 with malformed response", VerbProvision, Failure{Status: 200, Body: `{"x":`}, 200, "", `{"x":`, true},
		{"other 2xx", VerbProvision, Failure{Status: 204}, 204, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, c := setup(t)
			sid, pid := b.IDs(DefaultService, PlanSync)
			b.Fail(tt.verb, tt.failure)
			res := c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil))
			expect(t, res, tt.status, tt.code)
			if tt.body != "" && string(res.body) != tt.body {
				t.Errorf("body %q, want %q", res.body, tt.body)
			}
			if tt.status >= 400 && tt.body == "" {
				if d, _ := res.object(t)["description"].(string); d == "" {
					t.Errorf("error body without description: %s", res.body)
				}
			}
			if got := len(b.Instances()) == 1; got != tt.created {
				t.Errorf("instance created: %v, want %v", got, tt.created)
			}
		})
	}
}

func TestFailureTimes(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	b.Fail(VerbCatalog, Failure{Status: 500, Times: 2})
	b.Fail(VerbCatalog, Failure{Status: 503, Times: 1})
	for i, want := range []int{500, 500, 503, 200} {
		if got := c.do("GET", "/v2/catalog", nil).status; got != want {
			t.Errorf("request %d: %d, want %d", i+1, got, want)
		}
	}
	b.Fail(VerbCatalog, Failure{Status: 502})
	for range 3 {
		expect(t, c.do("GET", "/v2/catalog", nil), 502, "")
	}
	b.Clear(VerbCatalog)
	expect(t, c.do("GET", "/v2/catalog", nil), 200, "")

	// Failures apply to their own verb only, and not before authentication.
	b.Fail(VerbBind, Failure{Status: 500})
	c.header.Del("X-Broker-API-Version")
	expect(t, c.do("PUT", "/v2/service_instances/i/service_bindings/b", nil), 400, "BadRequest")
	c.header.Set("X-Broker-API-Version", "2.17")
	expect(t, c.do("GET", "/v2/catalog", nil), 200, "")
	expect(t, c.do("PUT", "/v2/service_instances/i/service_bindings/b", nil), 500, "")
}

func TestFailureOnPoll(t *testing.T) {
	t.Parallel()
	b, c := setup(t, WithPolls(0))
	sid, pid := b.IDs(DefaultService, PlanAsync)
	c.do("PUT", "/v2/service_instances/i-1?accepts_incomplete=true", provisionBody(sid, pid, nil))
	b.Fail(VerbLastOperation, Failure{Status: 500, Times: 1})
	b.Fail(VerbLastOperation, Failure{Status: 200, Body: "{nope", Times: 1})
	expect(t, c.do("GET", pollPath("i-1", ""), nil), 500, "")
	// The 500 did not count as a poll; the malformed 200 did.
	if res := c.do("GET", pollPath("i-1", ""), nil); string(res.body) != "{nope" {
		t.Errorf("malformed poll answer %q", res.body)
	}
	if in := b.Instances(); in[0].State != StateReady {
		t.Errorf("instance %+v", in[0])
	}
}

func TestAsyncFailed(t *testing.T) {
	t.Parallel()
	b, c := setup(t, WithPolls(0))
	sid, pid := b.IDs(DefaultService, PlanSync)

	// A failed asynchronous provision leaves an orphan to clean up.
	b.Fail(VerbProvision, Failure{AsyncFailed: true, Description: "no capacity", Times: 2})
	expect(t, c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil)), 422, "AsyncRequired")
	expect(t, c.do("PUT", "/v2/service_instances/i-1?accepts_incomplete=true", provisionBody(sid, pid, nil)), 202, "")
	res := c.do("GET", pollPath("i-1", ""), nil)
	if got := res.object(t); got["state"] != "failed" || got["description"] != "no capacity" || got["instance_usable"] != nil {
		t.Errorf("poll: %s", res.body)
	}
	if in := b.Instances(); len(in) != 1 || in[0].State != StateFailed {
		t.Fatalf("instances %+v", in)
	}
	expect(t, c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil)), 409, "")
	expect(t, c.do("DELETE", instancePath("i-1", sid, pid, false), nil), 200, "")

	// A failed update keeps the instance as it was.
	c.do("PUT", "/v2/service_instances/i-2", provisionBody(sid, pid, map[string]any{"a": 1}))
	b.Fail(VerbUpdate, Failure{AsyncFailed: true, InstanceUsable: new(true), UpdateRepeatable: new(false), Times: 1})
	expect(t, c.do("PATCH", "/v2/service_instances/i-2?accepts_incomplete=true", map[string]any{"service_id": sid, "parameters": map[string]any{"a": 2}}), 202, "")
	res = c.do("GET", pollPath("i-2", ""), nil)
	if got := res.object(t); got["state"] != "failed" || got["instance_usable"] != true || got["update_repeatable"] != false {
		t.Errorf("poll: %s", res.body)
	}
	if in := b.Instances(); in[0].Parameters["a"] != 1.0 || in[0].State != StateReady {
		t.Errorf("instance after failed update %+v", in[0])
	}

	// A failed deprovision keeps the instance.
	b.Fail(VerbDeprovision, Failure{AsyncFailed: true, InstanceUsable: new(false), Times: 1})
	expect(t, c.do("DELETE", instancePath("i-2", sid, pid, true), nil), 202, "")
	res = c.do("GET", pollPath("i-2", ""), nil)
	if got := res.object(t); got["state"] != "failed" || got["instance_usable"] != false || got["update_repeatable"] != nil {
		t.Errorf("poll: %s", res.body)
	}
	if len(b.Instances()) != 1 {
		t.Error("the instance went away")
	}

	// Bindings likewise.
	b.Fail(VerbBind, Failure{AsyncFailed: true, Times: 1})
	expect(t, c.do("PUT", "/v2/service_instances/i-2/service_bindings/b-1?accepts_incomplete=true", map[string]any{"service_id": sid, "plan_id": pid}), 202, "")
	if res := c.do("GET", bindingPollPath("i-2", "b-1", ""), nil); res.object(t)["state"] != "failed" {
		t.Errorf("bind poll: %s", res.body)
	}
	if bd := b.Bindings(); len(bd) != 1 || bd[0].State != StateFailed {
		t.Errorf("bindings %+v", bd)
	}
	expect(t, c.do("GET", "/v2/service_instances/i-2/service_bindings/b-1", nil), 404, "")
}

// TestNeverFinishes: an accepted operation stays in progress however often
// it is polled, until a delete halts it.
func TestNeverFinishes(t *testing.T) {
	t.Parallel()
	b, c := setup(t, WithPolls(0))
	sid, pid := b.IDs(DefaultService, PlanSync)
	b.Fail(VerbProvision, Failure{NeverFinishes: true, Times: 1})
	expect(t, c.do("PUT", "/v2/service_instances/i-1?accepts_incomplete=true", provisionBody(sid, pid, nil)), 202, "")
	for range 5 {
		if res := c.do("GET", pollPath("i-1", ""), nil); res.object(t)["state"] != "in progress" {
			t.Fatalf("poll: %s", res.body)
		}
	}
	// The delete (synchronous, on this plan) halts the provision.
	expect(t, c.do("DELETE", instancePath("i-1", sid, pid, true), nil), 200, "")
	if res := c.do("GET", pollPath("i-1", ""), nil); res.object(t)["state"] != "failed" {
		t.Errorf("poll after the delete: %s", res.body)
	}

	b.Fail(VerbDeprovision, Failure{NeverFinishes: true, Times: 1})
	c.do("PUT", "/v2/service_instances/i-2", provisionBody(sid, pid, nil))
	expect(t, c.do("DELETE", instancePath("i-2", sid, pid, true), nil), 202, "")
	// A repeated DELETE gets the operation in progress again, as the spec
	// requires, which never finishes either.
	expect(t, c.do("DELETE", instancePath("i-2", sid, pid, true), nil), 202, "")
	if res := c.do("GET", pollPath("i-2", ""), nil); res.object(t)["state"] != "in progress" {
		t.Errorf("poll: %s", res.body)
	}
}

// TestRetryAfterOnError: an injected error answer carries Retry-After, in
// whole seconds rounded up.
func TestRetryAfterOnError(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, pid := b.IDs(DefaultService, PlanSync)
	b.Fail(VerbProvision, Failure{Status: 422, Code: "ConcurrencyError", RetryAfter: 1500 * time.Millisecond, Times: 1})
	b.Fail(VerbProvision, Failure{Status: 503, Body: "busy", RetryAfter: time.Second, Times: 1})
	res := c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil))
	expect(t, res, 422, "ConcurrencyError")
	if got := res.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2", got)
	}
	res = c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil))
	if res.status != 503 || res.header.Get("Retry-After") != "1" {
		t.Errorf("answer %d with Retry-After %q, want 503 and 1", res.status, res.header.Get("Retry-After"))
	}
	if res := c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil)); res.header.Get("Retry-After") != "" {
		t.Errorf("Retry-After %q on a success", res.header.Get("Retry-After"))
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, pid := b.IDs(DefaultService, PlanSync)
	b.Fail(VerbProvision, Failure{Delay: time.Minute, Times: 1})
	c.http = &http.Client{Timeout: 200 * time.Millisecond}
	start := time.Now()
	if _, err := c.try("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil)); err == nil {
		t.Fatal("no timeout")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("timed out after %v", d)
	}
	// The slow broker did create the instance: an orphan.
	if in := b.Instances(); len(in) != 1 {
		t.Errorf("instances %+v", in)
	}

	// A short delay answers normally, late.
	b.Fail(VerbCatalog, Failure{Delay: 50 * time.Millisecond, Times: 1})
	c.http = b.Client()
	start = time.Now()
	expect(t, c.do("GET", "/v2/catalog", nil), 200, "")
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("answered after %v", d)
	}
}

func TestFailValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		verb Verb
		f    Failure
	}{
		{"nothing", VerbProvision, Failure{Times: 1}},
		{"negative times", VerbProvision, Failure{Status: 500, Times: -1}},
		{"async failed on a poll", VerbLastOperation, Failure{AsyncFailed: true}},
		{"async failed with a status", VerbProvision, Failure{AsyncFailed: true, Status: 500}},
		{"instance_usable on bind", VerbBind, Failure{Status: 500, InstanceUsable: new(true)}},
		{"update_repeatable on deprovision", VerbDeprovision, Failure{Status: 500, UpdateRepeatable: new(true)}},
		{"status 99", VerbProvision, Failure{Status: 99}},
		{"never finishes on a poll", VerbLastOperation, Failure{NeverFinishes: true}},
		{"never finishes with a status", VerbBind, Failure{NeverFinishes: true, Status: 500}},
		{"fails and never finishes", VerbProvision, Failure{NeverFinishes: true, AsyncFailed: true}},
		{"retry-after on a success", VerbProvision, Failure{Status: 201, RetryAfter: time.Second}},
		{"negative retry-after", VerbProvision, Failure{Status: 503, RetryAfter: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			b := New(rec)
			b.Fail(tt.verb, tt.f)
			if !rec.failed {
				t.Error("Fail accepted a failure that makes no sense")
			}
		})
	}
}

// recorder notes Errorf instead of failing the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }

func TestDownUp(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, pid := b.IDs(DefaultService, PlanSync)
	c.do("PUT", "/v2/service_instances/i-1", provisionBody(sid, pid, nil))

	// A request in flight when the broker goes down gets no answer.
	b.Fail(VerbCatalog, Failure{Delay: time.Minute, Times: 1})
	inFlight := make(chan error, 1)
	go func() {
		_, err := c.try("GET", "/v2/catalog", nil)
		inFlight <- err
	}()
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		if b.Count(VerbCatalog) == 0 {
			return errors.New("the catalog request has not arrived")
		}
		return nil
	})
	b.Down()
	if err := <-inFlight; err == nil {
		t.Error("request in flight answered")
	}
	_, err := c.try("GET", "/v2/catalog", nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("while down: %v, want connection refused", err)
	}
	b.Down() // twice is fine

	b.Up()
	b.Up()
	expect(t, c.do("GET", "/v2/catalog", nil), 200, "")
	if in := b.Instances(); len(in) != 1 {
		t.Errorf("state lost: %+v", in)
	}
	if !strings.HasPrefix(b.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %s", b.URL())
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	b, c := setup(t, WithTLS())
	other := New(t, WithTLS())
	if !strings.HasPrefix(b.URL(), "https://") {
		t.Fatalf("URL %s", b.URL())
	}
	pool := func(pem []byte) *x509.CertPool {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(pem) {
			t.Fatalf("CAPEM is not PEM: %q", pem)
		}
		return p
	}
	tests := []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{
		{"caBundle", &tls.Config{RootCAs: pool(b.CAPEM())}, true},
		{"insecureSkipTLSVerify", &tls.Config{InsecureSkipVerify: true}, true},
		{"system roots", &tls.Config{}, false},
		{"another broker's CA", &tls.Config{RootCAs: pool(other.CAPEM())}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			transport := &http.Transport{TLSClientConfig: tt.tls}
			defer transport.CloseIdleConnections()
			c.http = &http.Client{Transport: transport}
			res, err := c.try("GET", "/v2/catalog", nil)
			var unknown x509.UnknownAuthorityError
			switch {
			case tt.ok && (err != nil || res.status != 200):
				t.Errorf("%v %d", err, res.status)
			case !tt.ok && !errors.As(err, &unknown):
				t.Errorf("err %v, want an unknown authority", err)
			}
		})
	}
	// Down and Up keep the certificate.
	b.Down()
	b.Up()
	c.http = b.Client()
	expect(t, c.do("GET", "/v2/catalog", nil), 200, "")
}

// TestOperationEncoding shows that the operation query parameter is decoded
// properly, and that ids with reserved characters catch clients that do not
// percent-encode them.
func TestOperationEncoding(t *testing.T) {
	t.Parallel()
	const prefix = "op/1 +x&y=%#"
	b, c := setup(t, WithOperationPrefix(prefix))
	sid, pid := b.IDs(DefaultService, PlanAsync)
	res := c.do("PUT", "/v2/service_instances/i-1?accepts_incomplete=true", provisionBody(sid, pid, nil))
	op := res.object(t)["operation"].(string)
	if !strings.HasPrefix(op, prefix) {
		t.Fatalf("operation %q", op)
	}
	for _, tt := range []struct {
		name   string
		query  string
		status int
	}{
		{"QueryEscape", "operation=" + url.QueryEscape(op), 200},
		{"PathEscape", "operation=" + url.PathEscape(op), 400}, // "+" stays "+", a space when decoded
		{"not encoded", "operation=" + op, 400},                // "&", "#" and "%" break the query
		{"%20 for space", "operation=" + strings.ReplaceAll(url.QueryEscape(op), "+", "%20"), 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.try("GET", "/v2/service_instances/i-1/last_operation?"+tt.query, nil)
			if err != nil {
				t.Skipf("the request could not even be sent: %v", err)
			}
			expect(t, res, tt.status, "")
		})
	}
	reqs := b.Requests()
	if got := reqs[len(reqs)-1].Query.Get("operation"); got != op {
		t.Errorf("logged operation %q, want %q", got, op)
	}

	// Without a prefix, no operation is returned, and polls work without one.
	b2, c2 := setup(t, WithOperationPrefix(""))
	sid, pid = b2.IDs(DefaultService, PlanAsync)
	res = c2.do("PUT", "/v2/service_instances/i-1?accepts_incomplete=true", provisionBody(sid, pid, nil))
	if string(res.body) != "{}" {
		t.Errorf("202 body %s, want {}", res.body)
	}
	if res := c2.do("GET", pollPath("i-1", ""), nil); res.object(t)["state"] != "in progress" {
		t.Errorf("poll: %s", res.body)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	b, c := setup(t, WithPolls(0))
	sid, pid := b.IDs(DefaultService, PlanAsync)
	b.Fail(VerbBind, Failure{Status: 500, Times: 10})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			id := fmt.Sprintf("i-%d", i)
			c.do("PUT", "/v2/service_instances/"+id+"?accepts_incomplete=true", provisionBody(sid, pid, nil))
			c.do("GET", pollPath(id, ""), nil)
			for {
				if c.do("PUT", "/v2/service_instances/"+id+"/service_bindings/b", map[string]any{"service_id": sid, "plan_id": pid}).status == 201 {
					break
				}
			}
			b.Instances()
			b.Requests()
			c.do("DELETE", bindingPath(id, "b", sid, pid, false), nil)
			c.do("DELETE", instancePath(id, sid, pid, false), nil)
		})
	}
	wg.Go(func() {
		for range 20 {
			b.SetCatalog(b.Catalog())
		}
	})
	wg.Wait()
	if len(b.Instances())+len(b.Bindings()) != 0 {
		t.Errorf("left: %+v %+v", b.Instances(), b.Bindings())
	}
	if got := b.Count(VerbBind); got != 30 {
		t.Errorf("%d binds, want 30", got)
	}
}

func TestEscapedIDs(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	sid, pid := b.IDs(DefaultService, PlanSync)
	const id, bid = "i/1 x?", "b/1%"
	path := "/v2/service_instances/" + url.PathEscape(id)
	expect(t, c.do("PUT", path, provisionBody(sid, pid, nil)), 201, "")
	expect(t, c.do("PUT", path+"/service_bindings/"+url.PathEscape(bid), map[string]any{"service_id": sid, "plan_id": pid}), 201, "")
	if in, bd := b.Instances(), b.Bindings(); in[0].ID != id || bd[0].ID != bid || bd[0].InstanceID != id {
		t.Errorf("ids %q %q %q", in[0].ID, bd[0].InstanceID, bd[0].ID)
	}
	expect(t, c.do("GET", path+"/service_bindings/"+url.PathEscape(bid), nil), 200, "")
}
