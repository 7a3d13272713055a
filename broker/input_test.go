package broker_test

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestUnstorableInput: OSB ids, query parameters, bodies and the
// originating identity with NUL characters or invalid UTF-8 are 400s that
// name the field, never a 500 from the database; an oversize body is 413.
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
