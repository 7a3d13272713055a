package restapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// limitedToken issues a token of role limited to namespaces.
func (b *bundle) limitedToken(role string, namespaces ...string) string {
	b.t.Helper()
	tok, _, err := b.store.IssueToken(context.Background(), catalog.TokenRequest{Role: role, Namespaces: namespaces})
	if err != nil {
		b.t.Fatal(err)
	}
	return tok
}

func instanceIn(ns, name, plan string) map[string]any {
	return map[string]any{"name": name, "namespace": ns,
		"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": plan}}
}

// refused checks a 403 quota_exceeded with the sentence want.
func (b *bundle) refused(r response, want string) {
	b.t.Helper()
	if r.status != http.StatusForbidden || r.str("error") != "quota_exceeded" || r.str("message") != want {
		b.t.Errorf("got %d %s, want 403 quota_exceeded %q", r.status, r.raw, want)
	}
}

// TestQuotaREST: an admin for all namespaces sets a namespace's quota;
// its developers create up to each limit and are refused the next with
// the sentence; they read their usage, not other namespaces'; a namespace
// admin cannot raise its own quota; the default quota holds for the
// namespaces without one.
func TestQuotaREST(t *testing.T) {
	t.Parallel()
	bb := setup(t)
	bb.registerBindery("bindery")
	dev := bb.limitedToken(catalog.RoleDeveloper, "team-a")
	teamAdmin := bb.limitedToken(catalog.RoleAdmin, "team-a")

	body := map[string]any{"instances": 2, "bindings": 1, "paidPlans": false,
		"plans": []map[string]any{{"class": "postgresql", "plan": "standard", "instances": 1}}}
	bb.must(http.StatusForbidden, bb.do(teamAdmin, "PUT", "/quotas/team-a", body))
	bb.must(http.StatusForbidden, bb.do(dev, "PUT", "/quotas/team-a", body))
	q := bb.must(http.StatusOK, bb.do(bb.admin, "PUT", "/quotas/team-a", body))
	if q.str("namespace") != "team-a" || q.body["instances"] != float64(2) || q.body["paidPlans"] != false {
		t.Errorf("quota set: %s", q.raw)
	}
	if plans, _ := q.body["plans"].([]any); len(plans) != 1 || plans[0].(map[string]any)["plan"] != "standard" {
		t.Errorf("quota's plans: %s", q.raw)
	}

	bb.refused(bb.do(dev, "POST", "/instances", instanceIn("team-a", "rich", "large-async")),
		"namespace team-a may not use paid plans, and plan large-async is not free")
	bb.must(http.StatusCreated, bb.do(dev, "POST", "/instances", instanceIn("team-a", "db-1", "standard")))
	bb.refused(bb.do(dev, "POST", "/instances", instanceIn("team-a", "db-2", "standard")),
		"namespace team-a may have 1 instance of plan standard and has 1")
	bb.must(http.StatusCreated, bb.do(dev, "POST", "/instances", instanceIn("team-a", "db-2", "small")))
	bb.refused(bb.do(dev, "POST", "/instances", instanceIn("team-a", "db-3", "small")),
		"namespace team-a may have 2 instances and has 2")
	binding := func(name string) map[string]any {
		return map[string]any{"name": name, "namespace": "team-a", "spec": map[string]any{"instanceRef": map[string]any{"name": "db-1"}}}
	}
	bb.must(http.StatusCreated, bb.do(dev, "POST", "/bindings", binding("app-1")))
	bb.refused(bb.do(dev, "POST", "/bindings", binding("app-2")), "namespace team-a may have 1 binding and has 1")

	u := bb.must(http.StatusOK, bb.do(dev, "GET", "/quotas/team-a/usage", nil))
	inst, _ := u.body["instances"].(map[string]any)
	if inst["used"] != float64(2) || inst["limit"] != float64(2) || inst["source"] != "namespace" {
		t.Errorf("usage: %s", u.raw)
	}
	bb.must(http.StatusForbidden, bb.do(dev, "GET", "/quotas/team-b/usage", nil))
	bb.must(http.StatusForbidden, bb.do(dev, "GET", "/quotas/team-a", nil))

	// The default quota holds for team-b; team-a's own quota removed, for
	// team-a too.
	bb.must(http.StatusNotFound, bb.do(bb.admin, "GET", "/quotas/_default", nil))
	bb.must(http.StatusOK, bb.do(bb.admin, "PUT", "/quotas/_default", map[string]any{"instances": 1}))
	bb.must(http.StatusCreated, bb.do(bb.admin, "POST", "/instances", instanceIn("team-b", "db-1", "large-async")))
	bb.refused(bb.do(bb.admin, "POST", "/instances", instanceIn("team-b", "db-2", "small")),
		"namespace team-b may have 1 instance and has 1 (the default quota)")
	if l := bb.must(http.StatusOK, bb.do(bb.admin, "GET", "/quotas", nil)).items(); len(l) != 2 || l[0]["namespace"] != "" || l[1]["namespace"] != "team-a" {
		t.Errorf("quotas: %v", l)
	}
	bb.must(http.StatusNoContent, bb.do(bb.admin, "DELETE", "/quotas/team-a", nil))
	bb.must(http.StatusNotFound, bb.do(bb.admin, "DELETE", "/quotas/team-a", nil))
	bb.refused(bb.do(dev, "POST", "/instances", instanceIn("team-a", "db-3", "small")),
		"namespace team-a may have 1 instance and has 2 (the default quota)")

	// Bad quotas: every problem named.
	r := bb.must(http.StatusBadRequest, bb.do(bb.admin, "PUT", "/quotas/team-a", map[string]any{"plans": []map[string]any{{"class": "postgresql", "plan": "huge", "instances": 1}}}))
	if r.str("field") != "plans[0].plan" {
		t.Errorf("a plan that does not exist: %s", r.raw)
	}
	bb.must(http.StatusBadRequest, bb.do(bb.admin, "PUT", "/quotas/team-a", map[string]any{"instances": -1}))
	bb.must(http.StatusBadRequest, bb.do(bb.admin, "PUT", "/quotas/Team-A", map[string]any{"instances": 1}))
	bb.must(http.StatusBadRequest, bb.do(bb.admin, "GET", "/quotas/_default/usage", nil))
}

// TestQuotaRaceREST: 20 POSTs at once for the last 5 places: exactly 5
// are created, 15 refused with the sentence.
func TestQuotaRaceREST(t *testing.T) {
	t.Parallel()
	bb := setup(t)
	bb.registerBindery("bindery")
	for i := range 3 {
		bb.must(http.StatusCreated, bb.do(bb.admin, "POST", "/instances", instanceIn("race", fmt.Sprintf("before-%d", i), "small")))
	}
	bb.must(http.StatusOK, bb.do(bb.admin, "PUT", "/quotas/race", map[string]any{"instances": 8}))
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			r := bb.do(bb.admin, "POST", "/instances", instanceIn("race", fmt.Sprintf("racer-%d", i), "small"))
			statuses[i] = r.status
			if r.status == http.StatusForbidden && r.str("message") != "namespace race may have 8 instances and has 8" {
				t.Errorf("refusal: %s", r.raw)
			}
		})
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		if s == http.StatusCreated {
			created++
		} else if s != http.StatusForbidden {
			t.Errorf("status %d", s)
		}
	}
	if n := len(bb.must(http.StatusOK, bb.do(bb.admin, "GET", "/instances?namespace=race", nil)).items()); created != 5 || n != 8 {
		t.Errorf("%d created, %d in the namespace; want 5 and 8", created, n)
	}
}

// TestPlanVisibilityREST: a plan made visible to team-a only is not in
// team-b's lists nor found by id there; team-b's instance naming it is
// recorded unresolved (as for a plan no broker offers), team-a's resolves.
func TestPlanVisibilityREST(t *testing.T) {
	t.Parallel()
	bb := setup(t)
	bb.registerBindery("bindery")
	a, b := bb.limitedToken(catalog.RoleDeveloper, "team-a"), bb.limitedToken(catalog.RoleDeveloper, "team-b")
	large := bb.must(http.StatusOK, bb.do(bb.admin, "GET", "/serviceplans?name=large-async", nil)).items()[0]
	id := large["id"].(string)
	v := bb.must(http.StatusOK, bb.do(bb.admin, "PUT", "/serviceplans/"+id+"/visibility", map[string]any{"namespaces": []string{"team-a"}}))
	if v.body["restricted"] != true || fmt.Sprint(v.body["namespaces"]) != "[team-a]" {
		t.Errorf("visibility: %s", v.raw)
	}
	bb.must(http.StatusForbidden, bb.do(a, "PUT", "/serviceplans/"+id+"/visibility", map[string]any{"namespaces": []string{"team-b"}}))
	bb.must(http.StatusForbidden, bb.do(a, "GET", "/serviceplans/"+id+"/visibility", nil))

	names := func(token, query string) []string {
		var out []string
		for _, p := range bb.must(http.StatusOK, bb.do(token, "GET", "/serviceplans"+query, nil)).items() {
			out = append(out, p["spec"].(map[string]any)["externalName"].(string))
		}
		return out
	}
	for _, tc := range []struct {
		who, token, query string
		sees              bool
	}{
		{"team-a", a, "", true}, {"team-b", b, "", false}, {"admin", bb.admin, "", true},
		{"admin for team-b", bb.admin, "?visibleIn=team-b", false}, {"admin for team-a", bb.admin, "?visibleIn=team-a", true},
	} {
		if got := slices.Contains(names(tc.token, tc.query), "large-async"); got != tc.sees {
			t.Errorf("%s sees large-async: %v, want %v", tc.who, got, tc.sees)
		}
	}
	bb.must(http.StatusForbidden, bb.do(b, "GET", "/serviceplans?visibleIn=team-a", nil))
	bb.must(http.StatusNotFound, bb.do(b, "GET", "/serviceplans/"+id, nil))
	bb.must(http.StatusNotFound, bb.do(b, "GET", "/serviceplans/"+id+"/schemas", nil))
	bb.must(http.StatusOK, bb.do(a, "GET", "/serviceplans/"+id, nil))

	// Which other namespaces see the plan is not team-a's to know: its
	// annotation names team-a alone, to team-a.
	bb.must(http.StatusOK, bb.do(bb.admin, "PUT", "/serviceplans/"+id+"/visibility", map[string]any{"namespaces": []string{"team-a", "team-c"}}))
	annotation := func(o map[string]any) any {
		return o["annotations"].(map[string]any)[catalog.VisibleInAnnotation]
	}
	for _, r := range []struct {
		who, token, want string
	}{{"team-a", a, "team-a"}, {"admin", bb.admin, "team-a,team-c"}} {
		got := []any{annotation(bb.must(http.StatusOK, bb.do(r.token, "GET", "/serviceplans/"+id, nil)).body),
			annotation(bb.must(http.StatusOK, bb.do(r.token, "GET", "/serviceplans?name=large-async", nil)).items()[0])}
		for i, g := range got {
			if g != r.want {
				t.Errorf("%s, read %d: the plan is visible in %q, want %q", r.who, i, g, r.want)
			}
		}
	}
	bb.must(http.StatusOK, bb.do(bb.admin, "PUT", "/serviceplans/"+id+"/visibility", map[string]any{"namespaces": []string{"team-a"}}))

	waiting := bb.must(http.StatusCreated, bb.do(b, "POST", "/instances", instanceIn("team-b", "db", "large-async")))
	if ref := waiting.str("spec", "clusterServicePlanRef", "name"); ref != "" {
		t.Errorf("team-b's instance resolved to %q", ref)
	}
	resolved := bb.must(http.StatusCreated, bb.do(a, "POST", "/instances", instanceIn("team-a", "db", "large-async")))
	if ref := resolved.str("spec", "clusterServicePlanRef", "name"); ref != large["name"] {
		t.Errorf("team-a's instance resolved to %q, want %q", ref, large["name"])
	}
	v = bb.must(http.StatusOK, bb.do(bb.admin, "DELETE", "/serviceplans/"+id+"/visibility", nil))
	if v.body["restricted"] != false {
		t.Errorf("visibility after: %s", v.raw)
	}
	if !slices.Contains(names(b, ""), "large-async") {
		t.Error("team-b does not see the plan made visible to every namespace")
	}
}

// TestBrokerCountsHideHiddenPlans: a cluster broker's count of plans, to
// a token limited to namespaces, is of the plans visible to them, in the
// broker, the list of brokers and their export; a plan hidden from them
// does not exist to them, nor does how many there are.
func TestBrokerCountsHideHiddenPlans(t *testing.T) {
	t.Parallel()
	bb := setup(t)
	bb.registerBindery("bindery")
	a, b := bb.limitedToken(catalog.RoleViewer, "team-a"), bb.limitedToken(catalog.RoleViewer, "team-b")
	broker := bb.must(http.StatusOK, bb.do(bb.admin, "GET", "/brokers", nil)).items()[0]
	id := broker["id"].(string)
	plans := bb.must(http.StatusOK, bb.do(bb.admin, "GET", "/serviceplans", nil)).items()
	all := len(plans)
	counts := func(token string) [][2]int {
		status := func(o map[string]any) [2]int {
			st := o["status"].(map[string]any)
			return [2]int{int(st["serviceClassCount"].(float64)), int(st["servicePlanCount"].(float64))}
		}
		var out [][2]int
		out = append(out, status(bb.must(http.StatusOK, bb.do(token, "GET", "/brokers/"+id, nil)).body))
		out = append(out, status(bb.must(http.StatusOK, bb.do(token, "GET", "/brokers", nil)).items()[0]))
		var exported map[string]any
		if err := json.Unmarshal([]byte(bb.must(http.StatusOK, bb.do(token, "GET", "/export/brokers", nil)).raw), &exported); err != nil {
			t.Fatal(err)
		}
		return append(out, status(exported))
	}
	check := func(who, token string, want [2]int) {
		t.Helper()
		for i, got := range counts(token) {
			if got != want {
				t.Errorf("%s, read %d of 3: %d services and %d plans, want %v", who, i, got[0], got[1], want)
			}
		}
	}
	check("admin", bb.admin, [2]int{1, all})
	bb.must(http.StatusOK, bb.do(bb.admin, "PUT", "/serviceplans/"+plans[0]["id"].(string)+"/visibility", map[string]any{"namespaces": []string{"team-a"}}))
	check("admin", bb.admin, [2]int{1, all})
	check("team-a", a, [2]int{1, all})
	check("team-b", b, [2]int{1, all - 1})
	for _, p := range plans[1:] {
		bb.must(http.StatusOK, bb.do(bb.admin, "PUT", "/serviceplans/"+p["id"].(string)+"/visibility", map[string]any{"namespaces": []string{}}))
	}
	check("team-a", a, [2]int{1, 1})
	// The class stays listed, and counted, as in the list of classes.
	check("team-b", b, [2]int{1, 0})
}
