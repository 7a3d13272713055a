package describe

import (
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
)

// TestRun: an instance with its conditions, bindings and history, in
// words and exactly; -o json adds its bindings.
func TestRun(t *testing.T) {
	t.Parallel()
	srv := clitest.New(t).
		On("GET", "/instances/db", 200, `{"id":"i1","name":"db","namespace":"team","creationTimestamp":"2026-01-01T00:00:00Z","deletionTimestamp":"2026-01-01T01:00:00Z",
			"spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small","parameters":{"size":1}},
			"status":{"conditions":[{"type":"Ready","status":"False","reason":"DeprovisionBlockedByExistingCredentials","message":"All associated ServiceBindings must be removed before this ServiceInstance can be deleted"}]},
			"progress":{"state":"blocked","message":"It still has bindings: delete them first, then it is deprovisioned."}}`).
		On("GET", "/instances/i1/events", 200, `{"items":[{"time":"2026-01-01T00:00:00Z","type":"Normal","reason":"ProvisionedSuccessfully","message":"The instance was provisioned successfully","count":2}]}`).
		On("GET", "/bindings", 200, `{"items":[{"name":"app","spec":{"instanceRef":{"name":"db"},"secretName":"app"},"status":{"conditions":[{"type":"Ready","status":"True","reason":"InjectedBindResult"}]}},
			{"name":"other","spec":{"instanceRef":{"name":"cache"}}}]}`)
	f, st := srv.Factory(false)
	root := clitest.Root(f, NewCmd(f, nil))
	root.SetArgs([]string{"describe", "instance", "db", "-n", "team"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	want := `Name:          db
Namespace:     team
ID:            i1
Class:         postgresql
Plan:          small
Status:        Blocked
               It still has bindings: delete them first, then it is deprovisioned.
Created:       2026-01-01T00:00:00Z
Deleting since: 2026-01-01T01:00:00Z
Parameters:    size

Conditions:
  TYPE    STATUS   WHY       MESSAGE
  Ready   False    Blocked   All associated ServiceBindings must be removed before this ServiceInstance can be deleted

Bindings:
  NAME   SECRET   STATUS
  app    app      Ready

History:
  TIME                   TYPE     WHAT         MESSAGE
  2026-01-01T00:00:00Z   Normal   Ready   x2   The instance was provisioned successfully
`
	if st.Out.String() != want {
		t.Errorf("describe instance:\n%s\nwant\n%s", st.Out.String(), want)
	}
	if got := srv.Requests[len(srv.Requests)-1]; got != "GET /bindings?limit=1000&namespace=team" {
		t.Errorf("bindings read with %s", got)
	}
}
