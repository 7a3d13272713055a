package broker_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
)

// TestUnstorableInput: OSB ids, query parameters, bodies and the
// originating identity with NUL characters, lone surrogate escapes (which
// jsonb refuses) or invalid UTF-8 are 400s that name the field, never a 500
// from the database; an oversize body is 413.
func TestUnstorableInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good := `{"service_id":"` + serviceID + `","plan_id":"` + planSmall + `","organization_guid":"o","space_guid":"s"}`
	for _, tc := range []struct {
		name, method, path, body, header, want string
		status                                 int
	}{
		{"NUL in the instance id", "PUT", "/v2/service_instances/a%00b", good, "", "instance_id", 400},
		{"invalid UTF-8 in the binding id", "PUT", "/v2/service_instances/i1/service_bindings/%FF", `{"service_id":"` + serviceID + `","plan_id":"` + planSmall + `"}`, "", "binding_id", 400},
		{"NUL in a query parameter", "GET", "/v2/service_instances/i1/last_operation?operation=%00", "", "", "operation", 400},
		{"NUL in context", "PUT", "/v2/service_instances/i2", `{"service_id":"` + serviceID + `","plan_id":"` + planSmall + `","organization_guid":"o","space_guid":"s","context":{"ns":"a\u0000"}}`, "", "context.ns", 400},
		{"NUL in parameters", "PUT", "/v2/service_instances/i3", `{"service_id":"` + serviceID + `","plan_id":"` + planSmall + `","organization_guid":"o","space_guid":"s","parameters":{"\u0000":1}}`, "", "parameters", 400},
		{"a lone surrogate in context", "PUT", "/v2/service_instances/i7", `{"service_id":"` + serviceID + `","plan_id":"` + planSmall + `","organization_guid":"o","space_guid":"s","context":{"ns":"\ud800"}}`, "", "context.ns: contains a lone UTF-16 surrogate", 400},
		{"a lone surrogate in the originating identity", "PUT", "/v2/service_instances/i8", good,
			"kubernetes " + base64.StdEncoding.EncodeToString([]byte(`{"username":"\udc00"}`)), "value.username: contains a lone UTF-16 surrogate", 400},
		{"invalid UTF-8 in the body", "PUT", "/v2/service_instances/i4", "{\"service_id\":\"\xff\"}", "", "body", 400},
		{"NUL in the originating identity", "PUT", "/v2/service_instances/i5", good,
			"kubernetes " + base64.StdEncoding.EncodeToString([]byte(`{"username":"a\u0000"}`)), "value.username", 400},
		{"oversize body", "PUT", "/v2/service_instances/i6", `{"parameters":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`, "", "", 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.header != "" {
				headers = []string{"X-Broker-API-Originating-Identity", tc.header}
			}
			r := b.do(tc.method, tc.path, tc.body, headers...)
			if r.status != tc.status || !strings.Contains(r.str("description"), tc.want) {
				t.Errorf("%d %s, want %d naming %q", r.status, r.raw, tc.status, tc.want)
			}
		})
	}
}

// TestMemberTypes: members of a request that must be objects or strings
// are 400s naming the member and its kind when they are not; a context's
// number that no float64 holds is kept as sent, not taken for a context
// that is no object.
func TestMemberTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	provision := `{"service_id":"` + serviceID + `","plan_id":"` + planSmall + `","organization_guid":"o","space_guid":"s"`
	if r := b.do("PUT", "/v2/service_instances/m1", provision+`}`); r.status != 201 {
		t.Fatalf("provision: %d %s", r.status, r.raw)
	}
	bind := `{"service_id":"` + serviceID + `","plan_id":"` + planSmall + `"`
	for _, tc := range []struct {
		name, method, path, body, want string
		status                         int
	}{
		{"a context that is an array", "PUT", "/v2/service_instances/m2", provision + `,"context":[1]}`, "context: must be an object, not an array", 400},
		{"a context with a large number", "PUT", "/v2/service_instances/m3", provision + `,"context":{"platform":"kubernetes","n":1e400}}`, "", 201},
		{"an update's context that is a string", "PATCH", "/v2/service_instances/m1", `{"service_id":"` + serviceID + `","context":"x"}`, "context: must be an object, not a string", 400},
		{"previous_values.plan_id a number", "PATCH", "/v2/service_instances/m1", `{"service_id":"` + serviceID + `","previous_values":{"plan_id":5}}`, "previous_values.plan_id: must be a string, not number", 400},
		{"previous_values an array", "PATCH", "/v2/service_instances/m1", `{"service_id":"` + serviceID + `","previous_values":[]}`, "previous_values: must be an object, not array", 400},
		{"bind_resource.app_guid a number", "PUT", "/v2/service_instances/m1/service_bindings/b1", bind + `,"bind_resource":{"app_guid":5}}`, "bind_resource.app_guid: must be a string, not number", 400},
		{"bind_resource.route an object", "PUT", "/v2/service_instances/m1/service_bindings/b2", bind + `,"bind_resource":{"route":{}}}`, "bind_resource.route: must be a string, not object", 400},
		{"bind_resource a boolean", "PUT", "/v2/service_instances/m1/service_bindings/b3", bind + `,"bind_resource":true}`, "bind_resource: must be an object, not a boolean", 400},
		{"a binding's context with a large number", "PUT", "/v2/service_instances/m1/service_bindings/b4", bind + `,"context":{"n":-1e400},"bind_resource":{"app_guid":"a","other":1e400}}`, "", 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(tc.method, tc.path, tc.body)
			if r.status != tc.status || !strings.Contains(r.str("description"), tc.want) {
				t.Errorf("%d %s, want %d saying %q", r.status, r.raw, tc.status, tc.want)
			}
		})
	}
}

// TestIDsBounded: OSB ids of 100,000 characters, in the path, the body or
// the query, are 400s that name the field, never stored; 255 bytes are
// fine.
func TestIDsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := strings.Repeat("x", 100000)
	body := func(svc, plan string) string {
		return `{"service_id":"` + svc + `","plan_id":"` + plan + `","organization_guid":"o","space_guid":"s"}`
	}
	for _, tc := range []struct {
		name, method, path, body, want string
	}{
		{"instance id", "PUT", "/v2/service_instances/" + long, body(serviceID, planSmall), "instance_id: must be at most 255 bytes long, not 100000"},
		{"binding id", "PUT", "/v2/service_instances/i1/service_bindings/" + long, body(serviceID, planSmall), "binding_id: must be at most 255 bytes long"},
		{"service id", "PUT", "/v2/service_instances/" + randomID("i"), body(long, planSmall), "service_id: must be at most 255 bytes long"},
		{"plan id", "PATCH", "/v2/service_instances/" + randomID("i"), body(serviceID, long), "plan_id: must be at most 255 bytes long"},
		{"predecessor", "PUT", "/v2/service_instances/i1/service_bindings/b1", `{"predecessor_binding_id":"` + long + `"}`, "predecessor_binding_id: must be at most 255 bytes long"},
		{"query", "DELETE", "/v2/service_instances/i1?service_id=" + long + "&plan_id=" + planSmall, "", "query parameter service_id: must be at most 255 bytes long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(tc.method, tc.path, tc.body)
			if r.status != 400 || !strings.Contains(r.str("description"), tc.want) || len(r.raw) > 1000 {
				t.Errorf("%d %.300s, want 400 saying %q", r.status, r.raw, tc.want)
			}
		})
	}
	id := strings.Repeat("y", 255-len("-0123456789abcdef")) + randomID("")[1:]
	b.expect(b.do("PUT", "/v2/service_instances/"+id, provisionBody(planSmall, nil)), 201)
	b.expect(b.do("DELETE", "/v2/service_instances/"+id+q(planSmall), nil), 200)
}

// TestIDsDecodedOnce: an id is the same id however the platform
// percent-encodes it: stored decoded, found again by any encoding.
func TestIDsDecodedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	suffix := randomID("")
	for _, tc := range []struct{ put, get, stored string }{
		{"a%41b" + suffix, "aAb" + suffix, "aAb" + suffix},
		{"x%2Fy" + suffix, "x%2fy" + suffix, "x/y" + suffix},
		{"sp%20ace" + suffix, "sp ace" + suffix, "sp ace" + suffix},
	} {
		b.expect(b.do("PUT", "/v2/service_instances/"+tc.put, provisionBody(planSmall, nil)), 201)
		b.expect(b.do("GET", "/v2/service_instances/"+strings.ReplaceAll(tc.get, " ", "%20"), nil), 200)
		var n int
		if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM broker.instances WHERE id = $1`, tc.stored).Scan(&n); err != nil || n != 1 {
			t.Errorf("PUT %s: %d instances stored as %q (%v), want 1", tc.put, n, tc.stored, err)
		}
		b.expect(b.do("DELETE", "/v2/service_instances/"+tc.get+q(planSmall), nil), 200)
	}
}

// TestRequestIdentityChecked: an X-Broker-API-Request-Identity the broker
// cannot store (invalid UTF-8) or longer than 255 bytes is a 400 naming
// the header, neither echoed nor stored, and refused before any work; one
// of 255 bytes is recorded with the operation and echoed.
func TestRequestIdentityChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const header = "X-Broker-API-Request-Identity"
	for name, value := range map[string]string{
		"invalid UTF-8": "req-\xff\xfe",
		"256 bytes":     strings.Repeat("r", 256),
	} {
		id := randomID("reqid")
		r := b.do("PUT", "/v2/service_instances/"+id, provisionBody(planSmall, nil), header, value)
		if r.status != 400 || r.str("error") != "BadRequest" || !strings.Contains(r.str("description"), header) {
			t.Errorf("%s: %d %s, want 400 naming %s", name, r.status, r.raw, header)
		}
		if got := r.header.Get(header); got != "" {
			t.Errorf("%s: the refused identity is echoed: %q", name, got)
		}
		if lo := b.do("GET", "/v2/service_instances/"+id+"/last_operation", nil); lo.status != 404 {
			t.Errorf("%s: the instance has an operation: %d %s", name, lo.status, lo.raw)
		}
	}
	id := randomID("reqid")
	value := strings.Repeat("r", 255)
	r := b.expect(b.do("PUT", "/v2/service_instances/"+id, provisionBody(planSmall, nil), header, value), 201)
	if got := r.header.Get(header); got != value {
		t.Errorf("echoed identity %q, want the 255 bytes sent", got)
	}
	var stored string
	err := b.pool.QueryRow(context.Background(), `SELECT request_identity FROM broker.operations WHERE instance_id = $1`, id).Scan(&stored)
	if err != nil || stored != value {
		t.Errorf("recorded identity %q, %v", stored, err)
	}
	b.expect(b.do("DELETE", "/v2/service_instances/"+id+q(planSmall), nil), 200)
}
