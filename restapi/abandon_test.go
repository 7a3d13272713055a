package restapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/abandontest"
)

// TestAbandonThroughREST: POST .../abandon removes an instance and a
// binding whose deletion a broker refuses, or never answers, at once;
// the history names the token.
func TestAbandonThroughREST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _, err := b.store.IssueToken(context.Background(), catalog.TokenRequest{Name: "ops", Role: catalog.RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := b.store.CreateToken(context.Background(), catalog.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	abandontest.Run(t, b.store, func(t *testing.T, kind, namespace, name, id string) {
		if res := b.do(viewer, "POST", "/"+kind+"s/"+id+"/abandon", nil); res.status != http.StatusForbidden {
			t.Errorf("a viewer's abandon: %d, want 403", res.status)
		}
		if res := b.do(token, "POST", "/"+kind+"s/"+id+"/abandon", nil); res.status != http.StatusAccepted {
			t.Fatalf("abandon %s %s/%s: %d %s", kind, namespace, name, res.status, res.raw)
		}
	}, `API token "ops"`)
}
