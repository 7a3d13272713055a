package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// fakeBroker registers a broker (following the OSB protocol) offering
// services, and returns its first plan.
func (b *bundle) fakeBroker(t testing.TB, name string, services []osbtest.Service) *catalog.ServicePlan {
	t.Helper()
	ctx := context.Background()
	fake := osbtest.New(t, osbtest.WithCatalog(services))
	br := &catalog.Broker{}
	br.Name, br.Spec.URL = name, fake.URL()
	created, err := b.store.CreateBroker(ctx, br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Relist(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	plans, err := b.store.ListPlans(ctx, catalog.PlanFilter{Broker: name}, catalog.ListOptions{Limit: 1})
	if err != nil || len(plans.Items) == 0 {
		t.Fatalf("plans of %s: %v", name, err)
	}
	return plans.Items[0]
}

// instance records an instance of plan and returns it.
func (b *bundle) instance(t testing.TB, plan *catalog.ServicePlan, ns, name string) *catalog.Instance {
	t.Helper()
	in := &catalog.Instance{}
	in.Name, in.Namespace = name, ns
	in.Spec.ClusterServiceClassName, in.Spec.ClusterServicePlanName = plan.Spec.ClusterServiceClassRef.Name, plan.Name
	in, err := b.store.CreateInstance(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (b *bundle) binding(t testing.TB, in *catalog.Instance, name string) *catalog.Binding {
	t.Helper()
	bd := &catalog.Binding{}
	bd.Name, bd.Namespace = name, in.Namespace
	bd.Spec.InstanceRef = catalog.ObjectRef{Name: in.Name}
	bd, err := b.store.CreateBinding(context.Background(), bd)
	if err != nil {
		t.Fatal(err)
	}
	return bd
}

// limitedToken issues a token of role limited to namespaces.
func (b *bundle) limitedToken(t testing.TB, role string, namespaces ...string) string {
	t.Helper()
	tok, _, err := b.store.IssueToken(context.Background(), catalog.TokenRequest{Role: role, Namespaces: namespaces})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestNamespaceScope: a session of a token limited to namespaces sees and
// changes only those namespaces, on every page and action, and changes
// nothing cluster-wide.
func TestNamespaceScope(t *testing.T) {
	b := setup(t, setupOptions{})
	plan := b.fakeBroker(t, "fake", osbtest.GenerateCatalog(1, 2))
	mine := b.instance(t, plan, "team-a", "orders-db")
	theirs := b.instance(t, plan, "team-b", "payroll-db")
	myBinding := b.binding(t, mine, "orders-app")
	theirBinding := b.binding(t, theirs, "payroll-app")

	b.tokens["limited-dev"] = b.limitedToken(t, catalog.RoleDeveloper, "team-a")
	b.tokens["limited-admin"] = b.limitedToken(t, catalog.RoleAdmin, "team-a", "team-c")
	dev := b.client(t, "limited-dev")

	// Lists hold the allowed namespaces only.
	for _, p := range []string{"/instances", "/bindings", "/instances?namespace=team-a", "/bindings?namespace=team-a"} {
		res := dev.get(p)
		page := body(t, res)
		if res.StatusCode != http.StatusOK || strings.Contains(page, "payroll") || !strings.Contains(page, "orders-") {
			t.Errorf("%s: %d, other namespace shown: %v", p, res.StatusCode, strings.Contains(page, "payroll"))
		}
	}
	for _, p := range []string{"/instances?namespace=team-b", "/bindings?namespace=team-b", "/live/instances?namespace=team-b"} {
		if status, _ := dev.getSoon(p); status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", p, status)
		}
	}

	// A binding's instance is linked by its name, which leads to its page.
	if page := body(t, dev.get("/bindings")); !strings.Contains(page, `href="/namespaces/team-a/instances/orders-db"`) {
		t.Error("the bindings page does not link a binding's instance")
	}
	if res := dev.get("/namespaces/team-a/instances/orders-db"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/instances/"+mine.ID {
		t.Errorf("an instance by name: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}

	// Another namespace's objects are not found, whatever the action.
	for _, p := range []string{
		"/namespaces/team-b/instances/payroll-db", "/namespaces/team-a/instances/payroll-db",
		"/instances/" + theirs.ID, "/instances/" + theirs.ID + "/events", "/instances/" + theirs.ID + "/delete",
		"/live/instances/" + theirs.ID, "/bindings/" + theirBinding.ID, "/bindings/" + theirBinding.ID + "/events",
		"/bindings/" + theirBinding.ID + "/delete", "/live/bindings/" + theirBinding.ID,
	} {
		status, page := dev.getSoon(p)
		if status != http.StatusNotFound || strings.Contains(page, "payroll") {
			t.Errorf("GET %s: %d, want 404", p, status)
		}
	}
	for p, form := range map[string]url.Values{
		"/instances/" + theirs.ID:                    {"spec.parameters.size": {"3"}},
		"/instances/" + theirs.ID + "/delete":        {"confirm": {theirs.Name}},
		"/instances/" + theirs.ID + "/bindings":      {"name": {"sneaky"}},
		"/bindings/" + theirBinding.ID + "/reveal":   {},
		"/bindings/" + theirBinding.ID + "/delete":   {"confirm": {theirBinding.Name}},
		"/instances/" + mine.ID + "/delete?x=1":      {"confirm": {"wrong"}},
		"/bindings/" + myBinding.ID + "/delete?x=1":  {"confirm": {"wrong"}},
		"/instances/" + theirs.ID + "/delete?x=1":    {"confirm": {"wrong"}},
		"/bindings/" + theirBinding.ID + "/delete?x": {"confirm": {"wrong"}},
	} {
		res := dev.post(p, form)
		want := http.StatusNotFound
		if strings.Contains(p, mine.ID) || strings.Contains(p, myBinding.ID) {
			want = http.StatusBadRequest // a wrong confirmation of one's own object
		}
		if res.StatusCode != want {
			t.Errorf("POST %s: %d, want %d", p, res.StatusCode, want)
		}
		body(t, res)
	}
	for _, got := range []func() error{
		func() error { _, err := b.store.GetInstance(t.Context(), theirs.ID); return err },
		func() error { _, err := b.store.GetBinding(t.Context(), theirBinding.ID); return err },
	} {
		if err := got(); err != nil {
			t.Fatal(err)
		}
	}
	if in, _ := b.store.GetInstance(t.Context(), theirs.ID); in.DeletionTimestamp != nil || in.Spec.Parameters != nil {
		t.Fatal("another namespace's instance was changed")
	}
	if l, _ := b.store.ListBindings(t.Context(), catalog.ListOptions{Namespace: "team-b"}); len(l.Items) != 1 {
		t.Fatalf("bindings in team-b: %d", len(l.Items))
	}

	// Creating in a forbidden namespace is a field error; in an allowed
	// one it works. The form offers the allowed namespaces.
	res := dev.get("/instances/new?plan=" + plan.ID)
	page := body(t, res)
	if !strings.Contains(page, `<select id="f-namespace" name="namespace"><option selected>team-a</option></select>`) {
		t.Errorf("the form does not offer the session's namespaces")
	}
	res = dev.post("/instances", url.Values{"plan": {plan.ID}, "name": {"sneaky"}, "namespace": {"team-b"}})
	page = body(t, res)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="f-namespace-error"`) || !strings.Contains(page, "limited to the namespace(s) team-a") {
		t.Fatalf("create in team-b: %d", res.StatusCode)
	}
	if _, err := b.store.GetInstanceByName(t.Context(), "team-b", "sneaky"); err == nil {
		t.Fatal("created in a forbidden namespace")
	}
	if res := dev.post("/instances", url.Values{"plan": {plan.ID}, "name": {"fine"}, "namespace": {"team-a"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create in team-a: %d %s", res.StatusCode, body(t, res))
	}

	// The cluster's brokers offer their services to every namespace: an
	// admin limited to namespaces changes none of them, and is offered to
	// register brokers of its own namespaces only.
	admin := b.client(t, "limited-admin")
	brokers, err := b.store.ListBrokers(t.Context(), catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := brokers.Items[0].ID
	for p, form := range map[string]url.Values{
		"/brokers":                   {"name": {"other"}, "url": {"http://127.0.0.1:1"}, "auth": {"none"}},
		"/brokers/" + id + "/relist": {},
		"/brokers/" + id + "/delete": {"confirm": {"fake"}},
	} {
		res := admin.post(p, form)
		page := body(t, res)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(page, "all namespaces") {
			t.Errorf("limited admin POST %s: %d", p, res.StatusCode)
		}
	}
	if res := admin.get("/brokers/" + id + "/delete"); res.StatusCode != http.StatusForbidden {
		t.Errorf("limited admin's deregistration page: %d", res.StatusCode)
	}
	page = body(t, admin.get("/brokers"))
	if strings.Contains(page, "/relist") || strings.Contains(page, "Deregister") {
		t.Error("a limited admin is offered changes of the cluster's broker")
	}
	if !strings.Contains(page, `<select id="b-namespace" name="namespace" aria-describedby="b-namespace-hint"><option selected>team-a</option><option>team-c</option></select>`) {
		t.Error("a limited admin is not offered to register a broker in its namespaces (and only there)")
	}
	if l, _ := b.store.ListBrokers(t.Context(), catalog.ListOptions{}); len(l.Items) != 1 {
		t.Fatalf("brokers: %d", len(l.Items))
	}
	// An admin for all namespaces is offered them.
	if page := body(t, b.client(t, catalog.RoleAdmin).get("/brokers")); !strings.Contains(page, `action="/brokers"`) {
		t.Error("the admin is not offered to register a broker")
	}
}

// stream opens an event stream as c and hands on its events.
func (c *client) stream(path string) <-chan string {
	c.t.Helper()
	res, _ := c.openStream(path)
	events := make(chan string, 64)
	go func() {
		defer close(events)
		defer res.Body.Close()
		r := bufio.NewReader(res.Body)
		var ev strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\n" {
				if ev.Len() > 0 {
					events <- ev.String()
				}
				ev.Reset()
				continue
			}
			ev.WriteString(line)
		}
	}()
	return events
}

// waitEvent waits for an event containing want and returns the events
// before it.
func waitEvent(t *testing.T, events <-chan string, want string) []string {
	t.Helper()
	var before []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended before %q", want)
			}
			if strings.Contains(e, want) {
				return before
			}
			before = append(before, e)
		case <-timeout:
			t.Fatalf("no event with %q; before it: %q", want, before)
		}
	}
}

// TestNamespaceScopeLive: the event stream of a limited session carries
// nothing of other namespaces: their changes do not even wake it. An
// unlimited admin's stream is the witness that the other namespace's
// change went through the feed before the check.
func TestNamespaceScopeLive(t *testing.T) {
	b := setup(t, setupOptions{})
	plan := b.fakeBroker(t, "fake", osbtest.GenerateCatalog(1, 1))
	admin := b.client(t, catalog.RoleAdmin)
	// Each stream has namespaces of its own, so that the changes made for
	// one are nothing to the other.
	for _, tc := range []struct{ stream, mineNS, otherNS string }{
		{"/live/instances", "team-a", "team-b"},
		{"/live/bindings", "team-c", "team-d"},
	} {
		stream := tc.stream
		t.Run(strings.TrimPrefix(stream, "/live/"), func(t *testing.T) {
			suffix := strings.TrimPrefix(stream, "/live/")
			b.tokens["limited-"+suffix] = b.limitedToken(t, catalog.RoleViewer, tc.mineNS)
			viewer := b.client(t, "limited-"+suffix)
			limited, witness := viewer.stream(stream), admin.stream(stream)
			// Both streams open with the list as it is.
			for _, s := range []<-chan string{limited, witness} {
				waitEvent(t, s, "event: list")
			}
			other := b.instance(t, plan, tc.otherNS, "hidden-"+suffix)
			b.binding(t, other, "hidden-"+suffix)
			waitEvent(t, witness, "hidden-"+suffix)
			mine := b.instance(t, plan, tc.mineNS, "shown-"+suffix)
			b.binding(t, mine, "shown-"+suffix)
			before := waitEvent(t, limited, "shown-"+suffix)
			// One more change of its own namespace: by its event, any event
			// a wake by the other namespace's change caused is in (a late
			// one would carry "shown-" and come between).
			last := b.instance(t, plan, tc.mineNS, "last-"+suffix)
			b.binding(t, last, "last-"+suffix)
			between := waitEvent(t, limited, "last-"+suffix)
			if len(before) != 0 || len(between) != 0 {
				t.Fatalf("the other namespace's change woke the limited stream: %q, then %q", before, between)
			}
		})
	}
}
