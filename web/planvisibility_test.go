package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestInstancePageHidesPlans: an instance's page offers only the plans its
// namespace may use, and changing to a plan hidden from it is answered as
// a change to a plan that does not exist.
func TestInstancePageHidesPlans(t *testing.T) {
	b := setup(t, setupOptions{broker: true})
	b.tokens["team-dev"] = b.limitedToken(t, catalog.RoleDeveloper, "team-a")
	admin, dev := b.client(t, catalog.RoleAdmin), b.client(t, "team-dev")
	l := registerBindery(t, b, admin)
	ctx := context.Background()
	plans := map[string]string{}
	for _, p := range l.Items {
		plans[p.Spec.ExternalName] = p.ID
	}
	if res := dev.post("/instances", url.Values{"plan": {plans["small"]}, "name": {"db"}, "namespace": {"team-a"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d %s", res.StatusCode, body(t, res))
	}
	if _, err := b.store.SetPlanVisibility(ctx, plans["standard"], []string{"team-b"}); err != nil {
		t.Fatal(err)
	}
	db, err := b.store.GetInstanceByName(ctx, "team-a", "db")
	if err != nil {
		t.Fatal(err)
	}
	if page := body(t, dev.get("/instances/"+db.ID)); strings.Contains(page, plans["standard"]) {
		t.Errorf("team-a's instance page offers plan standard (id %s), which team-b only may use", plans["standard"])
	}
	hidden := body(t, dev.post("/instances/"+db.ID, url.Values{"plan": {plans["standard"]}}))
	if !strings.Contains(hidden, "no such plan") {
		t.Errorf("changing to a plan hidden from the namespace is not answered as no such plan:\n%s", hidden)
	}
}

// TestBrokersPageCountsVisiblePlans: the brokers page counts, for a
// session of some namespaces, the cluster broker's plans visible to them.
func TestBrokersPageCountsVisiblePlans(t *testing.T) {
	b := setup(t, setupOptions{broker: true})
	b.tokens["team-view"] = b.limitedToken(t, catalog.RoleViewer, "team-a")
	admin, viewer := b.client(t, catalog.RoleAdmin), b.client(t, "team-view")
	l := registerBindery(t, b, admin)
	ctx := context.Background()
	if _, err := b.store.SetPlanVisibility(ctx, l.Items[0].ID, []string{"team-b"}); err != nil {
		t.Fatal(err)
	}
	all, seen := fmt.Sprintf("1 service, %d plans", len(l.Items)), fmt.Sprintf("1 service, %d plans", len(l.Items)-1)
	if page := body(t, admin.get("/brokers")); !strings.Contains(page, all) {
		t.Errorf("the admin's brokers page does not say %q", all)
	}
	if page := body(t, viewer.get("/brokers")); !strings.Contains(page, seen) {
		t.Errorf("team-a's brokers page does not say %q:\n%s", seen, page)
	}
}

// registerBindery registers Bindery's own broker through the web UI as
// admin and returns its plans.
func registerBindery(t *testing.T, b *bundle, admin *client) catalog.List[*catalog.ServicePlan] {
	t.Helper()
	if res := admin.post("/brokers", url.Values{"name": {"bindery"}, "url": {b.brokerURL}, "auth": {"basic"}, "username": {brokerUser}, "password": {brokerPass}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("register: %d", res.StatusCode)
	}
	l, err := b.store.ListPlans(context.Background(), catalog.PlanFilter{}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
