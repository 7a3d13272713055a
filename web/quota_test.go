package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestQuotaWeb: an admin for all namespaces sets a namespace's quota in
// the quotas page's form (a bad one shows its problems by field); the
// namespace's developer creates instances and bindings up to the limits
// and is refused the next with the sentence every door shows; the
// instances page shows the quota panel; 20 creations at once for 5 places
// make 5; a plan visible to another namespace only is not in the
// developer's marketplace, nor can its page or form be opened; an admin
// limited to namespaces does not reach the quotas.
func TestQuotaWeb(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{broker: true})
	b.tokens["team-dev"] = b.limitedToken(t, catalog.RoleDeveloper, "team-a")
	b.tokens["team-admin"] = b.limitedToken(t, catalog.RoleAdmin, "team-a")
	admin, dev := b.client(t, catalog.RoleAdmin), b.client(t, "team-dev")
	if res := admin.post("/brokers", url.Values{"name": {"bindery"}, "url": {b.brokerURL}, "auth": {"basic"}, "username": {brokerUser}, "password": {brokerPass}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("register: %d", res.StatusCode)
	}
	plans := map[string]string{}
	l, err := b.store.ListPlans(context.Background(), catalog.PlanFilter{}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		plans[p.Spec.ExternalName] = p.ID
	}

	if res := b.client(t, "team-admin").get("/quotas"); res.StatusCode != http.StatusForbidden {
		t.Errorf("a team's admin on the quotas page: %d", res.StatusCode)
	}
	// The form's problems first, then the catalog's.
	for form, wants := range map[string][]string{
		"instances=-1&plans=postgresql%2Fhuge":         {"a count of at least 0", "line 1: write CLASS/PLAN=N"},
		"namespace=Team+A":                             {"is not valid: use lower-case letters, digits"},
		"namespace=team-a&plans=postgresql%2Fhuge%3D1": {`the cluster&#39;s service class &#34;postgresql&#34; offers no plan &#34;huge&#34;`},
	} {
		v, _ := url.ParseQuery(form)
		v.Set("default", "false")
		res := admin.post("/quotas", v)
		page := body(t, res)
		for _, want := range wants {
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, want) {
				t.Errorf("a bad quota %s: %d, want 400 saying %q", form, res.StatusCode, want)
			}
		}
	}
	res := admin.post("/quotas", url.Values{"default": {"false"}, "namespace": {"team-a"}, "instances": {"2"}, "bindings": {"1"},
		"plans": {"postgresql/standard=1\n"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("set a quota: %d %s", res.StatusCode, body(t, res))
	}
	if page := body(t, admin.get("/quotas")); !strings.Contains(page, "<th scope=\"row\">team-a</th><td>2</td><td>1</td><td>not allowed</td><td>postgresql/standard=1</td>") {
		t.Errorf("the quotas page does not list team-a's quota:\n%s", page)
	}

	create := func(name, plan string) *http.Response {
		return dev.post("/instances", url.Values{"plan": {plans[plan]}, "name": {name}, "namespace": {"team-a"}})
	}
	refused := func(res *http.Response, sentence string) {
		t.Helper()
		if page := body(t, res); res.StatusCode != http.StatusForbidden || !strings.Contains(page, sentence) {
			t.Errorf("got %d, want 403 saying %q", res.StatusCode, sentence)
		}
	}
	refused(create("rich", "large-async"), "namespace team-a may not use paid plans, and plan large-async is not free")
	if res := create("db", "standard"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d %s", res.StatusCode, body(t, res))
	}
	refused(create("db2", "standard"), "namespace team-a may have 1 instance of plan standard and has 1")
	if res := create("db2", "small"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d", res.StatusCode)
	}
	refused(create("db3", "small"), "namespace team-a may have 2 instances and has 2")
	db, err := b.store.GetInstanceByName(context.Background(), "team-a", "db")
	if err != nil {
		t.Fatal(err)
	}
	if res := dev.post("/instances/"+db.ID+"/bindings", url.Values{"name": {"app"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("bind: %d %s", res.StatusCode, body(t, res))
	}
	refused(dev.post("/instances/"+db.ID+"/bindings", url.Values{"name": {"app2"}}), "namespace team-a may have 1 binding and has 1")

	// The panel: for the session's one namespace, and for the one listed.
	for _, c := range []*client{dev, admin} {
		page := body(t, c.get("/instances?namespace=team-a"))
		for _, want := range []string{"Quota of team-a", `<th scope="row">Instances</th><td>2 <span class="badge bad">full</span></td><td>2</td><td>quota of team-a</td>`,
			`<th scope="row">Paid plans</th><td>-</td><td>not allowed</td>`, `<th scope="row">Instances of postgresql / standard</th><td>1 <span class="badge bad">full</span></td><td>1</td>`} {
			if !strings.Contains(page, want) {
				t.Errorf("the instances page does not show %q", want)
			}
		}
	}
	if page := body(t, admin.get("/instances")); strings.Contains(page, "Quota of") {
		t.Error("the instances page of all namespaces shows a quota panel")
	}

	// 20 at once for 5 places.
	if _, err := b.store.SetQuota(context.Background(), &catalog.Quota{Namespace: "race", Instances: new(5), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			res := admin.post("/instances", url.Values{"plan": {plans["small"]}, "name": {fmt.Sprintf("db-%d", i)}, "namespace": {"race"}})
			res.Body.Close()
			statuses[i] = res.StatusCode
		})
	}
	wg.Wait()
	made := 0
	for _, s := range statuses {
		if s == http.StatusSeeOther {
			made++
		} else if s != http.StatusForbidden {
			t.Errorf("a racer: %d", s)
		}
	}
	if made != 5 {
		t.Errorf("%d of 20 racers created an instance, want 5", made)
	}

	// Plan visibility.
	if _, err := b.store.SetPlanVisibility(context.Background(), plans["standard"], []string{"team-b"}); err != nil {
		t.Fatal(err)
	}
	var service string
	for _, p := range l.Items {
		if p.Spec.ExternalName == "standard" {
			service = "/services/" + p.Spec.ClusterServiceClassRef.Name
		}
	}
	if page := body(t, dev.get(service)); strings.Contains(page, ">standard<") || !strings.Contains(page, ">small<") {
		t.Error("team-a's service page shows a plan visible to team-b only, or not small")
	}
	if page := body(t, admin.get(service)); !strings.Contains(page, ">standard<") {
		t.Error("the admin's service page does not show the restricted plan")
	}
	for _, path := range []string{"/plans/" + plans["standard"], "/instances/new?plan=" + plans["standard"]} {
		if res := dev.get(path); res.StatusCode != http.StatusNotFound {
			t.Errorf("team-a's %s: %d, want 404", path, res.StatusCode)
		}
	}
	if res := create("hidden", "standard"); res.StatusCode != http.StatusNotFound {
		t.Errorf("team-a's creation of a hidden plan: %d, want 404", res.StatusCode)
	}
}
