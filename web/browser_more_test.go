package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// backupSchema is a plan's create schema as brokers write them beyond
// plain objects: definitions referred to with $ref, a oneOf told apart by
// a const, an anyOf of a number or a word.
var backupSchema = map[string]any{
	"$schema": "http://json-schema.org/draft-07/schema#",
	"type":    "object",
	"definitions": map[string]any{
		"s3": map[string]any{"type": "object", "title": "S3 bucket", "required": []any{"bucket"}, "properties": map[string]any{
			"kind": map[string]any{"const": "s3"}, "bucket": map[string]any{"type": "string", "minLength": 3},
			"region": map[string]any{"type": "string", "default": "eu-west-1"}}},
		"disk": map[string]any{"type": "object", "title": "Local disk", "required": []any{"path"}, "properties": map[string]any{
			"kind": map[string]any{"const": "disk"}, "path": map[string]any{"type": "string"}}},
	},
	"required": []any{"tier"},
	"properties": map[string]any{
		"tier":   map[string]any{"type": "string", "enum": []any{"small", "large"}, "default": "small"},
		"backup": map[string]any{"title": "Backups", "oneOf": []any{map[string]any{"$ref": "#/definitions/s3"}, map[string]any{"$ref": "#/definitions/disk"}}},
		"connections": map[string]any{"title": "Connections", "anyOf": []any{
			map[string]any{"type": "integer", "minimum": 1, "title": "A limit"}, map[string]any{"const": "unlimited", "title": "Unlimited"}}},
	},
}

// TestBrowserSchemaForms: a plan whose schema has $ref, oneOf and anyOf
// gets a form with a choice of alternatives (only the chosen one's inputs
// shown); the catalog's error lands next to the chosen alternative's
// field; the parameters made are those of the chosen alternatives. The
// broker works asynchronously: the operation under way shows, then Ready,
// without a reload. Long lists come in pages.
func TestBrowserSchemaForms(t *testing.T) {
	b := setup(t, setupOptions{engine: true})
	services := osbtest.GenerateCatalog(1, 1)
	services[0].Plans[0].Schemas = &osbtest.Schemas{ServiceInstance: &osbtest.ServiceInstanceSchema{
		Create: &osbtest.InputParameters{Parameters: backupSchema}}}
	fake := osbtest.New(t, osbtest.WithCatalog(services), osbtest.WithAsync(), osbtest.WithPolls(3))
	ctx := context.Background()
	br0 := &catalog.Broker{}
	br0.Name, br0.Spec.URL = "fake", fake.URL()
	created, err := b.store.CreateBroker(ctx, br0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Relist(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	plans, err := b.store.ListPlans(ctx, catalog.PlanFilter{Broker: "fake"}, catalog.ListOptions{})
	if err != nil || len(plans.Items) != 1 {
		t.Fatalf("plans: %v", err)
	}
	plan := plans.Items[0]

	br := newBrowser(t)
	br.allow("status of 400")
	q := chromedp.ByQuery
	br.run(chromedp.Navigate(b.url+"/login"), chromedp.WaitVisible("#token", q),
		chromedp.SendKeys("#token", b.tokens["developer"], q), chromedp.Submit("#token", q), chromedp.WaitVisible("ul.cards", q))

	// The plan's page lists the alternatives.
	br.run(chromedp.Navigate(b.url+"/plans/"+plan.ID), chromedp.WaitVisible("table.schema", q))
	br.waitText("table.schema", "one of", time.Second)
	br.waitText("table.schema", "S3 bucket, Local disk", time.Second)
	br.waitText("table.schema", "any of", time.Second)
	br.axe("plan-choices")

	// The form: the first alternative chosen, its inputs alone shown.
	br.run(chromedp.Navigate(b.url+"/instances/new?plan="+plan.ID), chromedp.WaitVisible("#f-name", q))
	bucket, path := "#f-spec-parameters-backup-0-bucket", "#f-spec-parameters-backup-1-path"
	if !br.visible(bucket) || br.visible(path) {
		t.Fatalf("before a choice: bucket shown %v, path shown %v", br.visible(bucket), br.visible(path))
	}
	if v := br.eval(`document.querySelector("#f-spec-parameters-backup-0-region").value`); v != "eu-west-1" {
		t.Fatalf("region default %q", v)
	}
	br.axe("instance-new-choices")
	// A bucket name too short: the catalog checks the schema, the error
	// goes next to the bucket.
	br.run(chromedp.SendKeys("#f-name", "with-backups", q), chromedp.SendKeys(bucket, "ab", q), chromedp.Submit("#f-name", q),
		chromedp.WaitVisible(bucket+"-error", q))
	if got := br.text(bucket + "-error"); !strings.Contains(got, "3") {
		t.Fatalf("the bucket's error says %q", got)
	}
	br.axe("instance-new-choices-invalid")
	// Choose the other alternatives by keyboard-reachable radios.
	br.run(chromedp.Click("#f-spec-parameters-backup-alt-1", q))
	if !br.visible(path) || br.visible(bucket) {
		t.Fatal("choosing Local disk does not show its inputs alone")
	}
	br.run(chromedp.SendKeys(path, "/srv/backups", q), chromedp.Click("#f-spec-parameters-connections-alt-1", q))
	br.axe("instance-new-choices-chosen")
	br.run(chromedp.Submit("#f-name", q), chromedp.WaitVisible("#instance-ready", q),
		chromedp.Evaluate(`window.stillHere = true; window.operations = [document.querySelector("#instance-operation").textContent];
			new MutationObserver(() => window.operations.push(document.querySelector("#instance-operation").textContent))
				.observe(document.querySelector("#instance-status"), {childList: true, subtree: true});`, nil))
	in, err := b.store.GetInstanceByName(ctx, "default", "with-backups")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(in.Spec.Parameters, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"tier": "small", "backup": map[string]any{"kind": "disk", "path": "/srv/backups"}, "connections": "unlimited"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parameters %v, want %v", got, want)
	}

	// The broker answers "in progress" a few times, a second apart: the
	// page shows the operation, then Ready, without a reload.
	br.waitText("#instance-ready", "Ready", 30*time.Second)
	br.stillHere()
	var operations []string
	br.run(chromedp.Evaluate(`window.operations`, &operations))
	if !strings.Contains(strings.Join(operations, "|"), "Provision (the broker is working on it)") {
		t.Fatalf("the operation under way never showed: %q", operations)
	}
	br.axe("instance-async-ready")

	// Long lists come in pages.
	for i := range 4 {
		in := &catalog.Instance{}
		in.Name, in.Namespace = fmt.Sprintf("paged-%d", i), "default"
		in.Spec.ClusterServiceClassName, in.Spec.ClusterServicePlanName = plan.Spec.ClusterServiceClassRef.Name, plan.Name
		in.Spec.Parameters = json.RawMessage(`{"tier":"large"}`)
		if _, err := b.store.CreateInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	br.run(chromedp.Navigate(b.url+"/instances?limit=2"), chromedp.WaitVisible("#instance-list table", q))
	var seen []string
	for page := 1; ; page++ {
		var names []string
		br.run(chromedp.Evaluate(`[...document.querySelectorAll("#instance-list tbody th a")].map(a => a.textContent)`, &names))
		if len(names) == 0 || len(names) > 2 {
			t.Fatalf("page %d shows %v", page, names)
		}
		seen = append(seen, names...)
		if page == 2 {
			br.axe("instances-page-2")
		}
		if br.count(`a[rel="next"]`) == 0 {
			break
		}
		br.leave(chromedp.Click(`a[rel="next"]`, q))
		br.run(chromedp.WaitVisible("#instance-list table", q))
		if br.count(`nav.pager a:not([rel])`) != 1 {
			t.Fatalf("page %d has no link to the first page", page+1)
		}
	}
	if len(seen) != 5 || seen[0] != "paged-0" || seen[4] != "with-backups" {
		t.Fatalf("the pages showed %v", seen)
	}
}

// TestBrowserNamespaces: signed in with a token limited to a namespace,
// the browser sees and is offered only that namespace, is told another
// namespace's objects do not exist, creates only in its own, registers and
// changes brokers of its own namespace only, and its open pages follow its namespace's changes (each
// within a second) and nothing of the others'.
func TestBrowserNamespaces(t *testing.T) {
	b := setup(t, setupOptions{})
	plan := b.fakeBroker(t, "fake", osbtest.GenerateCatalog(1, 1))
	mine := b.instance(t, plan, "team-a", "orders-db")
	theirs := b.instance(t, plan, "team-b", "payroll-db")
	theirBinding := b.binding(t, theirs, "payroll-app")
	token := b.limitedToken(t, catalog.RoleAdmin, "team-a")

	br := newBrowser(t)
	br.allow("status of 400", "status of 403", "status of 404")
	q := chromedp.ByQuery
	br.run(chromedp.Navigate(b.url+"/login"), chromedp.WaitVisible("#token", q),
		chromedp.SendKeys("#token", token, q), chromedp.Submit("#token", q), chromedp.WaitVisible("ul.cards", q))
	if got := br.text(".role"); got != "admin · team-a" {
		t.Fatalf("the header says %q", got)
	}

	br.run(chromedp.Navigate(b.url+"/instances"), chromedp.WaitVisible("#instance-list table", q))
	if got := br.text("#instance-list"); !strings.Contains(got, "orders-db") || strings.Contains(got, "payroll") {
		t.Fatalf("the list shows %q", got)
	}
	if got := strings.Join(strings.Fields(br.text("#filter-namespace")), " "); got != "All of yours team-a" {
		t.Fatalf("the namespace filter offers %q", got)
	}
	br.axe("instances-limited")

	for _, p := range []string{"/instances/" + theirs.ID, "/bindings/" + theirBinding.ID, "/instances/" + theirs.ID + "/events"} {
		br.run(chromedp.Navigate(b.url+p), chromedp.WaitVisible("h1", q))
		if got := br.text("main"); !strings.Contains(got, "does not exist") || strings.Contains(got, "payroll") {
			t.Fatalf("%s shows %q", p, got)
		}
	}
	br.axe("not-found-other-namespace")

	// Brokers: the cluster's seen, not changed; one of its namespace's
	// registered here, listed with its namespace, offered to change, and
	// its service in the marketplace marked as the namespace's.
	br.run(chromedp.Navigate(b.url+"/brokers"), chromedp.WaitVisible("table", q))
	if br.count("main table form") != 0 || br.count(`a[href$="/delete"]`) != 0 {
		t.Fatal("a limited admin is offered changes of the cluster's broker")
	}
	if got := br.text("#b-namespace"); got != "team-a" {
		t.Fatalf("namespaces offered for a broker: %q", got)
	}
	team := osbtest.New(t, osbtest.WithCatalog(teamCatalog("alpha-small")))
	br.run(chromedp.SendKeys("#b-name", "team-broker", q), chromedp.SendKeys("#b-url", team.URL(), q),
		chromedp.Click(`input[name="auth"][value="none"]`, q), chromedp.Submit("#b-name", q), chromedp.WaitVisible("p.flash", q))
	if got := br.text("p.flash"); !strings.Contains(got, "registered in namespace team-a") {
		t.Fatalf("registered: %q", got)
	}
	if br.count(`a[href$="/delete?namespace=team-a"][aria-label="Deregister team-broker in team-a"]`) != 1 || br.count("main table form") != 1 {
		t.Fatal("the namespace's broker is not offered to change")
	}
	br.axe("brokers-limited")
	br.run(chromedp.Navigate(b.url+"/?tag=team"), chromedp.WaitVisible("ul.cards", q))
	if got := br.text("ul.cards"); !strings.Contains(got, "mysql") || !strings.Contains(got, "namespace team-a only") {
		t.Fatalf("the marketplace shows %q", got)
	}
	br.axe("marketplace-namespaced")
	brokers, _ := b.store.ListBrokers(t.Context(), catalog.ListOptions{})
	br.run(chromedp.Navigate(b.url+"/brokers/"+brokers.Items[0].ID+"/delete"), chromedp.WaitVisible("h1", q))
	if got := br.text("main"); !strings.Contains(got, "admin token for all namespaces") {
		t.Fatalf("the deregistration page says %q", got)
	}

	// Creating: the namespaces offered are the token's; a forged other
	// one is refused next to the field.
	br.run(chromedp.Navigate(b.url+"/instances/new?plan="+plan.ID), chromedp.WaitVisible("#f-name", q))
	if got := br.text("#f-namespace"); got != "team-a" {
		t.Fatalf("namespaces offered: %q", got)
	}
	br.run(chromedp.SendKeys("#f-name", "sneaky", q),
		chromedp.Evaluate(`document.querySelector("#f-namespace").options[0].value = "team-b"`, nil),
		chromedp.Submit("#f-name", q), chromedp.WaitVisible("#f-namespace-error", q))
	if got := br.text("#f-namespace-error"); !strings.Contains(got, "limited to the namespace(s) team-a") {
		t.Fatalf("the namespace's error says %q", got)
	}
	br.axe("instance-new-forbidden-namespace")
	br.clear("#f-name")
	br.run(chromedp.SendKeys("#f-name", "sneaky-2", q), chromedp.Submit("#f-name", q), chromedp.WaitVisible("#instance-ready", q))
	if _, err := b.store.GetInstanceByName(t.Context(), "team-a", "sneaky-2"); err != nil {
		t.Fatalf("created in team-a: %v", err)
	}

	// Open pages follow their namespace only. A change of this namespace
	// shows the list's stream is open; an unlimited admin's stream is the
	// witness that the other namespace's change went through the feed.
	witness := b.client(t, catalog.RoleAdmin).stream("/live/instances")
	waitEvent(t, witness, "event: list")
	list := br.tab("list")
	list.run(chromedp.Navigate(b.url+"/instances"), chromedp.WaitVisible("#instance-list", q),
		chromedp.Evaluate(`window.stillHere = true; window.swaps = 0;
			new MutationObserver(() => window.swaps++).observe(document.querySelector("#instance-list"), {childList: true, subtree: true});`, nil))
	if _, err := b.store.UpdateInstanceStatus(t.Context(), mine.ID, func(in *catalog.Instance) error {
		in.Status.CurrentOperation = "Provision"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	list.waitText("#instance-list", "Provision", 5*time.Second)
	swaps := func() int {
		var n int
		list.run(chromedp.Evaluate(`window.swaps`, &n))
		return n
	}
	start := swaps()
	b.instance(t, plan, "team-b", "hidden-db")
	waitEvent(t, witness, "hidden-db")
	b.instance(t, plan, "team-a", "shown-db")
	list.waitText("#instance-list", "shown-db", time.Second)
	b.instance(t, plan, "team-a", "last-db")
	list.waitText("#instance-list", "last-db", time.Second)
	if n := swaps() - start; n != 2 || strings.Contains(list.text("#instance-list"), "hidden-db") {
		t.Fatalf("the list changed %d times for 2 changes of its namespace and 1 of another", n)
	}
	list.stillHere()
	list.axe("instances-live-limited")
	br.run(chromedp.Navigate(b.url+"/instances/"+mine.ID), chromedp.WaitVisible("#instance-ready", q),
		chromedp.Evaluate(`window.stillHere = true`, nil))
	// A change of the instance's status shows within a second.
	if _, err := b.store.UpdateInstanceStatus(t.Context(), mine.ID, func(in *catalog.Instance) error {
		in.Status.LastError = "marker-of-this-change"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	br.waitText("#instance-status", "marker-of-this-change", time.Second)
	br.stillHere()
	br.axe("instance-live-limited")
	list.checkClean("list tab")
}

// visible tells whether an element is shown (display:none hides it and
// what is in it).
func (b *browser) visible(sel string) bool {
	b.t.Helper()
	var shown bool
	b.run(chromedp.Evaluate(`(() => { const e = document.querySelector(`+jsString(sel)+`); return !!e && e.offsetParent !== null; })()`, &shown))
	return shown
}
