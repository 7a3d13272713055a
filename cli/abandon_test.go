package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/abandontest"
)

// TestAbandonThroughCLI: `deprovision --abandon` and `unbind --abandon`
// remove an instance and a binding whose deletion a broker refuses, or
// never answers, at once, saying what stays behind; the history names the
// token.
func TestAbandonThroughCLI(t *testing.T) {
	t.Parallel()
	w := setup(t, false)
	token, _, err := w.store.IssueToken(context.Background(), catalog.TokenRequest{Name: "cli-ops", Role: catalog.RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	w.login(token)
	abandontest.Run(t, w.store, func(t *testing.T, kind, namespace, name, _ string) {
		verb, left := "deprovision", "stays there"
		if kind == "binding" {
			verb, left = "unbind", "stay valid at the broker"
		}
		r := w.run(verb, name, "-n", namespace, "--abandon")
		if r.code != 0 {
			t.Fatalf("bindery %s --abandon: exit %d\n%s", verb, r.code, r.errOut)
		}
		if !strings.Contains(r.errOut, "is being abandoned") || !strings.Contains(r.errOut, left) {
			t.Errorf("bindery %s --abandon says %q", verb, r.errOut)
		}
	}, `API token "cli-ops"`)
}
