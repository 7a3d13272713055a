package restapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestNamespaces: GET /namespaces lists the namespaces that hold
// instances, bindings or brokers, in order, each once; a token limited to
// namespaces sees only those.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dev := b.token("developer")
	for i, ns := range []string{"b-team", "a-team", "b-team"} {
		b.must(201, b.do(dev, "POST", "/instances", map[string]any{"name": fmt.Sprintf("db-%d", i), "namespace": ns,
			"spec": map[string]any{"clusterServiceClassExternalName": "x", "clusterServicePlanExternalName": "y"}}))
	}
	b.must(201, b.do(dev, "POST", "/bindings", map[string]any{"name": "app", "namespace": "c-team", "spec": map[string]any{"instanceRef": map[string]any{"name": "db"}}}))
	list := func(token string) []string {
		var out []string
		for _, v := range b.must(200, b.do(token, "GET", "/namespaces", nil)).body["items"].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	if got := list(dev); !slices.Equal(got, []string{"a-team", "b-team", "c-team"}) {
		t.Errorf("namespaces %q", got)
	}
	limited, _, err := b.store.IssueToken(context.Background(), catalog.TokenRequest{Role: catalog.RoleViewer, Namespaces: []string{"b-team", "z"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := list(limited); !slices.Equal(got, []string{"b-team"}) {
		t.Errorf("a token of b-team and z sees %q", got)
	}
}

// TestRegisterWithoutWaiting: ?wait=false answers before the first
// catalogue fetch, which the relister makes later.
func TestRegisterWithoutWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.must(201, b.do(b.admin, "POST", "/brokers?wait=false", map[string]any{"name": "later", "url": b.brokerURL,
		"auth": map[string]any{"basic": map[string]any{"username": brokerUser, "password": brokerPass}}}))
	if conds, _ := r.body["status"].(map[string]any)["conditions"].([]any); len(conds) != 0 || r.str("status", "lastCatalogRetrievalTime") != "" {
		t.Errorf("fetched before answering: %s", r.raw)
	}
	r = b.must(400, b.do(b.admin, "POST", "/brokers?wait=maybe", map[string]any{"name": "x", "url": b.brokerURL}))
	if r.str("field") != "wait" {
		t.Errorf("a bad wait: %s", r.raw)
	}
}

// TestNamespacesOfALimitedToken: a token limited to namespaces gets its
// namespaces in use, however many other namespaces sort before them (the
// list of every namespace stops at 1,000).
func TestNamespacesOfALimitedToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i := range 1001 {
		in := &catalog.Instance{}
		in.Name, in.Namespace = "db", fmt.Sprintf("ns-%04d", i)
		in.Spec.ClusterServiceClassExternalName, in.Spec.ClusterServicePlanExternalName = "c", "p"
		if _, err := b.store.CreateInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	token := b.limitedToken(catalog.RoleViewer, "ns-1000", "unused", "ns-0003")
	if got := strings.TrimSpace(string(b.must(200, b.do(token, "GET", "/namespaces", nil)).raw)); got != `{"items":["ns-0003","ns-1000"]}` {
		t.Errorf("the namespaces of a token of ns-1000, ns-0003 and an unused one: %s", got)
	}
	if n := len(b.must(200, b.do(b.admin, "GET", "/namespaces", nil)).items()); n != 1000 {
		t.Errorf("the namespaces of a token of all: %d, want the first 1,000", n)
	}
}
