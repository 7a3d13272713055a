package broker

import (
	"testing"

	"github.com/bindery-dev/bindery/internal/pgtext"
)

// FuzzDecodeRequests feeds arbitrary bytes to the decoders of every OSB
// request body and to the originating-identity parser: they must never
// panic, and what they accept must be well-formed.
func FuzzDecodeRequests(f *testing.F) {
	for _, seed := range []string{
		`{"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"s","parameters":{"a":1}}`,
		`{"service_id":"s","plan_id":"p","maintenance_info":{"version":"1.0.0"}}`,
		`{"service_id":"s","parameters":null,"context":{"platform":"kubernetes"}}`,
		`{"predecessor_binding_id":"b","bind_resource":{"app_guid":"a"}}`,
		`[]`, `null`, `{"service_id":7}`, `{} {}`, "",
		`{"service_id":"a\u0000"}`, "{\"context\":{\"x\":\"\xff\"}}",
	} {
		f.Add([]byte(seed), "kubernetes eyJ1c2VybmFtZSI6ImEifQ==")
	}
	f.Fuzz(func(t *testing.T, body []byte, identityHeader string) {
		var p provisionRequest
		if decodeJSON(body, &p) == nil && p.validate() == nil {
			if p.ServiceID == "" || p.PlanID == "" || p.OrganizationGUID == "" || p.SpaceGUID == "" {
				t.Fatalf("accepted a provision without required fields: %q", body)
			}
		}
		var u updateRequest
		if decodeJSON(body, &u) == nil && pgtext.CheckJSON("", body) != nil {
			t.Fatalf("accepted a body PostgreSQL cannot store: %q", body)
		}
		var b bindRequest
		if decodeJSON(body, &b) == nil {
			_ = b.appGUID()
			_ = b.checkObjects()
		}
		if id, err := parseOriginatingIdentity(identityHeader); err == nil {
			if id.Platform == "" || len(id.Value) == 0 || pgtext.CheckJSON("", id.Value) != nil || pgtext.Problem(id.Platform) != "" {
				t.Fatalf("accepted identity %q as %+v", identityHeader, id)
			}
		}
	})
}
