package web_test

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// teamCatalog is the catalogue of a team's own broker: one service, mysql
// (a name no other broker of these tests offers), with plans of the given
// names under ids of their own.
func teamCatalog(plans ...string) []osbtest.Service {
	s := osbtest.Service{ID: "mysql-id", Name: "mysql", Description: "A team's MySQL.", Bindable: true, Tags: []string{"team"}}
	for _, p := range plans {
		s.Plans = append(s.Plans, osbtest.Plan{ID: "mysql-" + p + "-id", Name: p, Description: "The " + p + " plan."})
	}
	return []osbtest.Service{s}
}

// namespacedSetup is a web UI with the engine, Bindery's own broker
// registered for the cluster through the brokers page, and sessions of
// the tokens the namespaced tests use: team-a's admin, developer and
// viewer, team-b's admin and viewer, and an admin of all namespaces.
type namespacedSetup struct {
	*bundle
	all, teamAdmin, teamDev, teamViewer, otherAdmin, otherViewer *client
}

func setupNamespaced(t *testing.T) *namespacedSetup {
	t.Helper()
	b := setup(t, setupOptions{broker: true, engine: true})
	for name, tc := range map[string]struct {
		role string
		ns   string
	}{
		"team-admin": {catalog.RoleAdmin, "team-a"}, "team-dev": {catalog.RoleDeveloper, "team-a"}, "team-viewer": {catalog.RoleViewer, "team-a"},
		"other-admin": {catalog.RoleAdmin, "team-b"}, "other-viewer": {catalog.RoleViewer, "team-b"},
	} {
		b.tokens[name] = b.limitedToken(t, tc.role, tc.ns)
	}
	n := &namespacedSetup{bundle: b, all: b.client(t, catalog.RoleAdmin),
		teamAdmin: b.client(t, "team-admin"), teamDev: b.client(t, "team-dev"), teamViewer: b.client(t, "team-viewer"),
		otherAdmin: b.client(t, "other-admin"), otherViewer: b.client(t, "other-viewer")}
	res := n.all.post("/brokers", url.Values{"name": {"bindery"}, "url": {b.brokerURL}, "auth": {"basic"}, "username": {brokerUser}, "password": {brokerPass}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("register the cluster's broker: %d %s", res.StatusCode, body(t, res))
	}
	return n
}

// teamBroker is the form that registers a team's broker at fake.
func teamBroker(name, ns string, fake *osbtest.Broker) url.Values {
	return url.Values{"name": {name}, "namespace": {ns}, "url": {fake.URL()}, "auth": {"basic"}, "username": {"team"}, "password": {"team-secret"}}
}

// expect checks a response's status and that its page says each of says,
// and returns the page.
func expect(t *testing.T, what string, res *http.Response, status int, says ...string) string {
	t.Helper()
	page := body(t, res)
	if res.StatusCode != status {
		t.Errorf("%s: %d, want %d: %.400s", what, res.StatusCode, status, page)
		return page
	}
	for _, s := range says {
		if !strings.Contains(page, s) {
			t.Errorf("%s: the page does not say %q", what, s)
		}
	}
	return page
}

// TestNamespacedBrokers: a team's own broker (a ServiceBroker) through the
// web UI, with the REST API's rules. An admin of its namespace (or of all)
// registers, relists and deregisters it, no one else; the brokers page
// lists it, with its namespace, to the namespace's sessions only; its
// classes and plans are in their marketplace and nobody else's, and their
// addresses are not found from another namespace; an instance of its plan
// is made in its namespace, naming class and plan by external name, and
// provisioned by the team's broker.
func TestNamespacedBrokers(t *testing.T) {
	n := setupNamespaced(t)
	ctx := context.Background()
	fakeA := osbtest.New(t, osbtest.WithBasicAuth("team", "team-secret"), osbtest.WithCatalog(teamCatalog("alpha-small", "alpha-big")))
	fakeB := osbtest.New(t, osbtest.WithBasicAuth("team", "team-secret"), osbtest.WithCatalog(teamCatalog("beta-tiny")))
	// (post adds its session's CSRF field to a form: each post gets a copy.)
	reg := func() url.Values { return teamBroker("team-broker", "team-a", fakeA) }

	// Who registers it: an admin of its namespace (or of all), no one else.
	expect(t, "a developer registers", n.teamDev.post("/brokers", reg()), http.StatusForbidden)
	expect(t, "another namespace's admin registers", n.otherAdmin.post("/brokers", reg()), http.StatusBadRequest,
		`id="b-namespace-error"`, "limited to the namespace(s) team-b")
	cluster := teamBroker("mine", "", fakeA)
	expect(t, "a namespace's admin registers a cluster broker", n.teamAdmin.post("/brokers", cluster), http.StatusForbidden, "all namespaces")
	if _, err := n.store.GetBroker(ctx, "mine"); err == nil {
		t.Fatal("a namespace's admin registered a cluster broker")
	}
	res := n.teamAdmin.post("/brokers", reg())
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the team's admin registers its broker: %d %s", res.StatusCode, body(t, res))
	}
	expect(t, "flash", n.teamAdmin.get("/brokers"), http.StatusOK, "Broker team-broker registered in namespace team-a")
	brokerA, err := n.store.GetBrokerIn(ctx, "team-a", "team-broker")
	if err != nil || brokerA.Status.ServiceClassCount != 1 || brokerA.Status.ServicePlanCount != 2 {
		t.Fatalf("team-a's broker: %+v %v", brokerA, err)
	}
	expect(t, "the same name again", n.teamAdmin.post("/brokers", reg()), http.StatusConflict, "exists in namespace")
	// The admin of all namespaces registers team-b's, of the same name.
	if res := n.all.post("/brokers", teamBroker("team-broker", "team-b", fakeB)); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the admin registers team-b's broker: %d %s", res.StatusCode, body(t, res))
	}
	brokerB, err := n.store.GetBrokerIn(ctx, "team-b", "team-broker")
	if err != nil {
		t.Fatal(err)
	}
	bindery, err := n.store.GetBroker(ctx, "bindery")
	if err != nil {
		t.Fatal(err)
	}

	// The brokers page: the cluster's and the session's namespaces' own,
	// with their namespace; changes offered where the session may make
	// them.
	qA, qB := "?namespace=team-a", "?namespace=team-b"
	page := expect(t, "team-a's brokers page", n.teamAdmin.get("/brokers"), http.StatusOK,
		"<th scope=\"row\">bindery</th>\n<td data-label=\"Namespace\"><span class=\"muted\">all (cluster)</span></td>",
		"<th scope=\"row\">team-broker</th>\n<td data-label=\"Namespace\">team-a</td>\n<td data-label=\"URL\" class=\"url\">"+fakeA.URL()+"</td>",
		`action="/brokers/`+brokerA.ID+`/relist`+qA+`"`, `href="/brokers/`+brokerA.ID+`/delete`+qA+`"`,
		`href="/brokers/`+brokerA.ID+`/events`+qA+`"`, `href="/brokers/`+bindery.ID+`/events"`)
	if strings.Contains(page, fakeB.URL()) || strings.Contains(page, brokerB.ID) || strings.Contains(page, "/brokers/"+bindery.ID+"/relist") {
		t.Error("team-a's admin is shown team-b's broker, or offered to change the cluster's")
	}
	page = expect(t, "team-a's viewer's brokers page", n.teamViewer.get("/brokers"), http.StatusOK, fakeA.URL(), "bindery")
	if strings.Contains(page, "/relist") || strings.Contains(page, fakeB.URL()) {
		t.Error("a viewer is offered a relist, or shown team-b's broker")
	}
	expect(t, "the admin's brokers page", n.all.get("/brokers"), http.StatusOK, fakeA.URL(), fakeB.URL(),
		`action="/brokers/`+brokerB.ID+`/relist`+qB+`"`, `action="/brokers/`+bindery.ID+`/relist"`)

	// Another namespace's broker is not found, whatever the action; the
	// cluster's is refused to a namespace's admin; a developer is refused
	// by role before anything is looked up.
	for _, p := range []string{"/brokers/" + brokerA.ID + "/events" + qA, "/brokers/team-broker/events" + qA, "/brokers/" + brokerA.ID + "/delete" + qA} {
		expect(t, "team-b's admin GET "+p, n.otherAdmin.get(p), http.StatusNotFound)
	}
	expect(t, "team-a's broker without its namespace", n.teamViewer.get("/brokers/"+brokerA.ID+"/events"), http.StatusNotFound)
	for p, form := range map[string]url.Values{
		"/brokers/" + brokerA.ID + "/relist" + qA: {},
		"/brokers/" + brokerA.ID + "/delete" + qA: {"confirm": {"team-broker"}},
		"/brokers/team-broker/relist" + qA:        {},
	} {
		expect(t, "team-b's admin POST "+p, n.otherAdmin.post(p, maps.Clone(form)), http.StatusNotFound)
		expect(t, "team-a's developer POST "+p, n.teamDev.post(p, maps.Clone(form)), http.StatusForbidden, "admin role")
	}
	expect(t, "team-a's admin relists the cluster's", n.teamAdmin.post("/brokers/"+bindery.ID+"/relist", url.Values{}), http.StatusForbidden, "all namespaces")
	expect(t, "history", n.teamViewer.get("/brokers/"+brokerA.ID+"/events"+qA), http.StatusOK, "team-a/team-broker")

	// The marketplace: the cluster's services and the session's
	// namespaces' own, marked with their namespace.
	plans, err := n.store.ListPlans(ctx, catalog.PlanFilter{}, catalog.ListOptions{Namespaced: true, Namespace: "team-a"})
	if err != nil || len(plans.Items) != 2 {
		t.Fatalf("team-a's plans: %v", err)
	}
	small := plans.Items[0]
	if small.Spec.ExternalName != "alpha-small" {
		t.Fatalf("team-a's first plan: %s", small.Spec.ExternalName)
	}
	classA, errA := n.store.GetClassIn(ctx, "team-a", "mysql-id")
	classB, errB := n.store.GetClassIn(ctx, "team-b", "mysql-id")
	if errA != nil || errB != nil {
		t.Fatalf("the teams' classes: %v %v", errA, errB)
	}
	cardA := `href="/services/` + classA.ID + `?namespace=team-a">mysql</a>`
	cardB := `href="/services/` + classB.ID + `?namespace=team-b">mysql</a>`
	const postgres = `">PostgreSQL</a>`
	market := func(c *client, path string) string {
		t.Helper()
		return expect(t, "GET "+path, c.get(path), http.StatusOK)
	}
	for range 2 { // the second time from the cache, per set of namespaces
		page = market(n.teamViewer, "/")
		for _, want := range []string{postgres, cardA, `<span class="scope">namespace team-a only</span>`, "2 plans, free",
			`<option value="team-a/team-broker">team-broker (namespace team-a)</option>`} {
			if !strings.Contains(page, want) {
				t.Errorf("team-a's marketplace does not show %q", want)
			}
		}
		if strings.Contains(page, classB.ID) || strings.Contains(page, "namespace team-b") {
			t.Error("team-a's marketplace shows team-b's")
		}
		page = market(n.otherViewer, "/")
		if !strings.Contains(page, cardB) || strings.Contains(page, classA.ID) || !strings.Contains(page, postgres) {
			t.Error("team-b's marketplace: not its own and the cluster's only")
		}
		page = market(n.all, "/")
		if !strings.Contains(page, cardA) || !strings.Contains(page, cardB) || !strings.Contains(page, postgres) {
			t.Error("the marketplace of all namespaces lacks some")
		}
	}
	if page = market(n.teamViewer, "/?broker=team-a/team-broker"); strings.Count(page, `href="/services/`) != 1 || strings.Contains(page, postgres) {
		t.Error("team-a's marketplace, filtered by its broker")
	}
	if page = market(n.teamViewer, "/?broker=team-broker"); strings.Contains(page, `href="/services/`) {
		t.Error("a cluster broker's name matched a namespace's broker")
	}
	if page = market(n.teamViewer, "/?broker=team-b/team-broker"); strings.Contains(page, classB.ID) || !strings.Contains(page, "Nothing matches") {
		t.Error("team-a's marketplace, filtered by team-b's broker")
	}
	if page = market(n.all, "/?tag=team&price=free"); strings.Count(page, `href="/services/`) != 2 {
		t.Errorf("the team tag: %d services, want 2", strings.Count(page, `href="/services/`))
	}
	// The service's page compares its plans, in its namespace only.
	servicePath := "/services/" + classA.ID + qA
	expect(t, "team-a's service", n.teamDev.get(servicePath), http.StatusOK, "namespace team-a only", "alpha-big",
		`href="/instances/new?plan=`+small.ID+`&amp;namespace=team-a"`, `href="/plans/`+small.ID+`?namespace=team-a"`)
	expect(t, "team-a's service without its namespace", n.teamViewer.get("/services/"+classA.ID), http.StatusNotFound)
	expect(t, "team-a's service from team-b", n.otherViewer.get(servicePath), http.StatusNotFound)
	expect(t, "team-a's service's icon from team-b", n.otherViewer.get("/services/"+classA.ID+"/icon"+qA), http.StatusNotFound)
	expect(t, "team-a's service's icon", n.teamViewer.get("/services/"+classA.ID+"/icon"+qA), http.StatusOK, "<svg", ">M</text>")

	// A relist of the team's broker (by its admin) shows at the next load.
	fakeA.SetCatalog(teamCatalog("alpha-small", "alpha-big", "alpha-huge"))
	if res := n.teamAdmin.post("/brokers/"+brokerA.ID+"/relist"+qA, url.Values{}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("team-a's admin relists: %d %s", res.StatusCode, body(t, res))
	}
	if page = market(n.teamViewer, "/"); !strings.Contains(page, "3 plans, free") {
		t.Error("the relist does not show in the marketplace")
	}
	if res := n.all.post("/brokers/team-broker/relist"+qA, url.Values{}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("the admin relists team-a's broker by name: %d", res.StatusCode)
	}

	// The plan's page, and its form, in its namespace only.
	planPath := "/plans/" + small.ID + qA
	expect(t, "team-a's plan", n.teamDev.get(planPath), http.StatusOK, "namespace team-a only",
		`href="/instances/new?plan=`+small.ID+`&amp;namespace=team-a"`, "team-broker")
	expect(t, "team-a's plan without its namespace", n.teamViewer.get("/plans/"+small.ID), http.StatusNotFound)
	expect(t, "team-a's plan from team-b", n.otherViewer.get(planPath), http.StatusNotFound)
	expect(t, "team-a's plan in team-b", n.all.get("/plans/"+small.ID+qB), http.StatusNotFound)
	expect(t, "team-a's plan's form from team-b", n.otherAdmin.get("/instances/new?plan="+small.ID+"&namespace=team-a"), http.StatusNotFound)
	expect(t, "the form", n.teamDev.get("/instances/new?plan="+small.ID+"&namespace=team-a"), http.StatusOK,
		`<input id="f-namespace" name="namespace" value="team-a" readonly`, `href="/plans/`+small.ID+`?namespace=team-a"`)

	// An instance of it: in its namespace only, naming class and plan by
	// external name, provisioned by the team's broker.
	for _, tc := range []struct {
		c  *client
		ns string
	}{{n.otherAdmin, "team-b"}, {n.otherAdmin, "team-a"}, {n.all, "team-b"}, {n.teamDev, "default"}} {
		res := tc.c.post("/instances", url.Values{"plan": {small.ID}, "name": {"sneaky"}, "namespace": {tc.ns}})
		expect(t, "an instance of team-a's plan in "+tc.ns, res, http.StatusNotFound)
	}
	expect(t, "an invalid name", n.teamDev.post("/instances", url.Values{"plan": {small.ID}, "name": {"Orders_DB"}, "namespace": {"team-a"}}),
		http.StatusBadRequest, `id="f-name-error"`, `<input id="f-namespace" name="namespace" value="team-a" readonly`)
	res = n.teamDev.post("/instances", url.Values{"plan": {small.ID}, "name": {"orders-db"}, "namespace": {"team-a"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("team-a's developer creates an instance: %d %s", res.StatusCode, body(t, res))
	}
	in, err := n.store.GetInstanceByName(ctx, "team-a", "orders-db")
	if err != nil {
		t.Fatal(err)
	}
	if s := in.Spec; s.ServiceClassExternalName != "mysql" || s.ServicePlanExternalName != "alpha-small" || s.ServicePlanRef == nil ||
		s.ServicePlanRef.Name != small.Name || s.ClusterServiceClassName != "" || s.ClusterServicePlanRef != nil {
		t.Fatalf("the instance's spec: %+v", s)
	}
	if l, _ := n.store.ListInstances(ctx, catalog.ListOptions{}); len(l.Items) != 1 {
		t.Fatalf("%d instances, want 1", len(l.Items))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := n.store.GetInstance(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := catalog.FindCondition(got.Status.Conditions, catalog.ConditionReady); ok && r.Status == catalog.ConditionTrue {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance is not Ready: %+v", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	expect(t, "the instance's page", n.teamViewer.get("/instances/"+in.ID), http.StatusOK,
		`href="/plans/`+small.ID+`?namespace=team-a">alpha-small</a>`, "Ready")
	expect(t, "the instances list", n.teamViewer.get("/instances"), http.StatusOK,
		`<a href="/services/`+classA.ID+`?namespace=team-a">mysql</a> <span class="muted">/</span> alpha-small`)

	// Deregistering: the namespace's admin, not while its plans have
	// instances; a broker without takes its classes and plans along.
	expect(t, "confirmation", n.teamAdmin.get("/brokers/"+brokerA.ID+"/delete"+qA), http.StatusOK,
		`action="/brokers/`+brokerA.ID+`/delete`+qA+`"`, "namespace team-a&#39;s marketplace")
	expect(t, "deregister with an instance", n.teamAdmin.post("/brokers/"+brokerA.ID+"/delete"+qA, url.Values{"confirm": {"team-broker"}}), http.StatusConflict)
	expect(t, "team-b's admin deregisters team-b's", n.otherAdmin.post("/brokers/"+brokerB.ID+"/delete"+qB, url.Values{"confirm": {"team-broker"}}), http.StatusSeeOther)
	if _, err := n.store.GetBrokerIn(ctx, "team-b", "team-broker"); err == nil {
		t.Error("team-b's broker is still there")
	}
	if page = market(n.otherViewer, "/"); strings.Contains(page, classB.ID) || strings.Contains(page, "mysql") {
		t.Error("team-b's marketplace still offers its deregistered broker's plans")
	}
	if _, err := n.store.GetBrokerIn(ctx, "team-a", "team-broker"); err != nil {
		t.Errorf("team-a's broker: %v", err)
	}

	// A second broker of team-a offering a service of the same name: its
	// plan's instance names class and plan by object name, since the
	// external names would not say which.
	other := osbtest.New(t, osbtest.WithCatalog([]osbtest.Service{{ID: "other-mysql-id", Name: "mysql", Description: "Another MySQL.", Bindable: true,
		Plans: []osbtest.Plan{{ID: "other-small-id", Name: "alpha-small", Description: "Another small plan."}}}}))
	form := teamBroker("other", "team-a", other)
	form.Set("auth", "none")
	expect(t, "a second broker of team-a", n.teamAdmin.post("/brokers", form), http.StatusSeeOther)
	otherPlan, err := n.store.GetPlanIn(ctx, "team-a", "other-small-id")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "an instance of the second broker's plan", n.teamDev.post("/instances", url.Values{"plan": {otherPlan.ID}, "name": {"other-db"}, "namespace": {"team-a"}}), http.StatusSeeOther)
	in, err = n.store.GetInstanceByName(ctx, "team-a", "other-db")
	if err != nil {
		t.Fatal(err)
	}
	if s := in.Spec; s.ServiceClassName != "other-mysql-id" || s.ServicePlanName != "other-small-id" || s.ServiceClassExternalName != "" ||
		s.ServicePlanRef == nil || s.ServicePlanRef.Name != "other-small-id" {
		t.Fatalf("the second broker's instance: %+v", s)
	}
}

// TestNamespacedBrokerInput: a namespace that cannot be one, in a form or
// an address, is a 400 naming it (next to the field, in a form), never a
// 5xx, and nothing is stored.
func TestNamespacedBrokerInput(t *testing.T) {
	n := setupNamespaced(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("team", "team-secret"), osbtest.WithCatalog(teamCatalog("alpha-small")))
	if res := n.teamAdmin.post("/brokers", teamBroker("team-broker", "team-a", fake)); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("register: %d", res.StatusCode)
	}
	broker, err := n.store.GetBrokerIn(t.Context(), "team-a", "team-broker")
	if err != nil {
		t.Fatal(err)
	}
	plans, err := n.store.ListPlans(t.Context(), catalog.PlanFilter{}, catalog.ListOptions{Namespaced: true, Namespace: "team-a"})
	if err != nil || len(plans.Items) != 1 {
		t.Fatalf("team-a's plans: %v", err)
	}
	plan := plans.Items[0]
	for _, tc := range []struct {
		c    *client
		ns   string
		says string
	}{
		{n.all, "a\x00b", "NUL"}, {n.all, "a\xffb", "UTF-8"}, {n.all, "Team_A", "lower-case letters"}, {n.all, strings.Repeat("a", 64), "63"},
		{n.teamAdmin, "a\x00b", "NUL"}, {n.teamAdmin, "Team_A", "limited to"},
	} {
		res := tc.c.post("/brokers", teamBroker("x", tc.ns, fake))
		page := expect(t, "register in "+printable(tc.ns), res, http.StatusBadRequest, `id="b-namespace-error"`, tc.says)
		if printable(tc.ns) != tc.ns && strings.Contains(page, tc.ns) {
			t.Errorf("register in %s: the bad namespace is shown back", printable(tc.ns))
		}
	}
	for _, tc := range []struct {
		method, path string
		form         url.Values
	}{
		{"GET", "/brokers/team-broker/events?namespace=Team_A", nil},
		{"GET", "/brokers/" + broker.ID + "/events?namespace=a%00", nil},
		{"GET", "/brokers/team-broker/delete?namespace=-a", nil},
		{"POST", "/brokers/team-broker/relist?namespace=a.b", url.Values{}},
		{"POST", "/brokers/team-broker/delete?namespace=%FF", url.Values{"confirm": {"team-broker"}}},
		{"GET", "/plans/" + plan.ID + "?namespace=A", nil},
		{"GET", "/plans/" + plan.ID + "?namespace=a%00", nil},
		{"GET", "/instances/new?plan=" + plan.ID + "&namespace=team_a", nil},
		{"POST", "/instances", url.Values{"plan": {plan.ID}, "name": {"db"}, "namespace": {"team\x00a"}}},
		{"POST", "/instances", url.Values{"plan": {plan.ID}, "name": {"db"}, "namespace": {"Team-A"}}},
		{"POST", "/instances", url.Values{"plan": {plan.ID}, "name": {"db"}, "namespace": {"\xff"}}},
	} {
		var res *http.Response
		if tc.method == "GET" {
			res = n.all.get(tc.path)
		} else {
			res = n.all.post(tc.path, tc.form)
		}
		page := expect(t, tc.method+" "+tc.path, res, http.StatusBadRequest)
		if !strings.Contains(page, "namespace") {
			t.Errorf("%s %s: the answer does not name the namespace", tc.method, tc.path)
		}
	}
	if l, _ := n.store.ListBrokers(t.Context(), catalog.ListOptions{Namespaced: true}); len(l.Items) != 1 {
		t.Errorf("%d namespaced brokers, want 1", len(l.Items))
	}
	if l, _ := n.store.ListInstances(t.Context(), catalog.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("%d instances, want none", len(l.Items))
	}
	if strings.Contains(n.logs.String(), "web request failed") {
		t.Errorf("a request failed:\n%s", n.logs.String())
	}
}

// printable shows bad text readably in a test's messages.
func printable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\0`)
}

// TestNamespacedBrokersLive: the brokers page's stream of a session
// limited to a namespace is woken by the cluster's brokers and its
// namespace's own, and not even woken by another namespace's. An
// unlimited admin's stream is the witness that the other namespace's
// change went through the feed before the check.
func TestNamespacedBrokersLive(t *testing.T) {
	b := setup(t, setupOptions{})
	fake := osbtest.New(t, osbtest.WithCatalog(teamCatalog("alpha-small")))
	b.tokens["team-viewer"] = b.limitedToken(t, catalog.RoleViewer, "team-a")
	limited, witness := b.client(t, "team-viewer").stream("/live/brokers"), b.client(t, catalog.RoleAdmin).stream("/live/brokers")
	for _, s := range []<-chan string{limited, witness} {
		waitEvent(t, s, "event: rows")
	}
	register := func(name, ns string) {
		t.Helper()
		br := &catalog.Broker{}
		br.Name, br.Namespace, br.Spec.URL = name, ns, fake.URL()
		if _, err := b.store.CreateBroker(t.Context(), br, nil); err != nil {
			t.Fatal(err)
		}
	}
	register("hidden-broker", "team-b")
	waitEvent(t, witness, "hidden-broker")
	register("shown-broker", "team-a")
	before := waitEvent(t, limited, "shown-broker")
	// The cluster's: by its event, any event a wake by the other
	// namespace's change caused is in (a late one would come between).
	register("everyones-broker", "")
	between := waitEvent(t, limited, "everyones-broker")
	if len(before) != 0 || len(between) != 0 {
		t.Fatalf("the other namespace's change woke the limited stream: %q, then %q", before, between)
	}
}
