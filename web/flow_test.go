package web_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserFlow walks the web UI as its users do, in a real browser,
// through what it promises: sign in (by keyboard), register brokers (one
// that cannot be reached, whose error shows, deregistered after a
// confirmation), relist, browse and filter the marketplace, read a plan's
// parameters, provision a database from the generated form (an invalid
// field first), watch it and the lists become Ready without a reload,
// change its parameters and its plan, bind, reveal the credentials and connect with them (psql), read the
// history; then as a viewer, who is offered none of the changes and
// refused them; then delete, each after a confirmation, and look at it all
// on a phone. Every page is checked with axe-core, must log no console
// error, and is saved as a screenshot.
func TestBrowserFlow(t *testing.T) {
	b := setup(t, setupOptions{broker: true, engine: true})
	br := newBrowser(t)
	q := chromedp.ByQuery

	// Every page needs a session: the browser lands on the sign-in form.
	br.run(chromedp.Navigate(b.url+"/"), chromedp.WaitVisible("#token", q))
	br.axe("login")
	// Refusals answer 4xx, which the browser logs; these are expected.
	br.allow("status of 401", "status of 400", "status of 403", "status of 404")
	br.run(chromedp.SendKeys("#token", "bdy_wrong", q), chromedp.Submit("#token", q), chromedp.WaitVisible("#token-error", q))
	if got := br.text("#token-error"); !strings.Contains(got, "not valid") {
		t.Fatalf("wrong token: %q", got)
	}
	// By keyboard: the token typed, Enter sends the form.
	br.run(chromedp.Focus("#token", q), chromedp.SendKeys("#token", b.tokens["admin"]+kb.Enter, q), chromedp.WaitVisible("div.empty", q))
	if got := br.text("div.empty"); !strings.Contains(got, "Register a broker") {
		t.Fatalf("empty marketplace says %q", got)
	}
	if strings.Contains(br.html(), b.tokens["admin"]) {
		t.Fatal("the token is in the page")
	}
	br.axe("marketplace-empty")
	// The first Tab reaches the skip link, which moves focus to the page.
	br.run(chromedp.KeyEvent(kb.Tab))
	if got := br.eval(`document.activeElement.textContent`); got != "Skip to content" {
		t.Fatalf("the first Tab focuses %q", got)
	}
	br.run(chromedp.KeyEvent(kb.Enter))
	if got := br.eval(`location.hash`); got != "#main" {
		t.Fatalf("the skip link goes to %q", got)
	}

	// A broker that cannot be reached is registered, and the page says
	// its catalogue could not be fetched, in words.
	br.run(chromedp.Click(`a[href="/brokers"]`, q), chromedp.WaitVisible("#b-name", q))
	br.axe("brokers-empty")
	br.run(chromedp.SendKeys("#b-name", "dead", q), chromedp.SendKeys("#b-url", "http://127.0.0.1:1", q),
		chromedp.Click(`input[name="auth"][value="none"]`, q), chromedp.Submit("#b-name", q), chromedp.WaitVisible("p.flash.warn", q))
	if got := br.text("p.flash"); !strings.Contains(got, "catalogue was not fetched") || strings.Contains(got, "dial tcp") {
		t.Fatalf("the unreachable broker's registration says %q", got)
	}
	// The live table may first draw the broker as it was registered,
	// before its first catalogue fetch failed: wait for the failure.
	br.waitText("tbody .lasterror", "127.0.0.1:1", 10*time.Second)
	if got := br.text("tbody .badge"); got != "Unreachable" {
		t.Fatalf("the unreachable broker's status says %q", got)
	}
	br.axe("brokers-failed")
	// Deregistering asks to type the name; a wrong one is refused.
	br.run(chromedp.Click(`a[aria-label="Deregister dead"]`, q), chromedp.WaitVisible("#confirm", q))
	br.axe("broker-deregister-confirm")
	br.run(chromedp.SendKeys("#confirm", "dea", q), chromedp.Submit("#confirm", q), chromedp.WaitVisible("#confirm-error", q))
	if got := br.text("#confirm-error"); !strings.Contains(got, "type dead exactly") {
		t.Fatalf("a wrong confirmation says %q", got)
	}
	br.run(chromedp.SendKeys("#confirm", "dead", q), chromedp.Submit("#confirm", q), chromedp.WaitVisible("p.flash", q))
	if got := br.text("p.flash"); !strings.Contains(got, "dead deregistered") {
		t.Fatalf("deregistered: %q", got)
	}

	// Bindery's own broker, with its credentials.
	br.run(chromedp.SendKeys("#b-name", "bindery", q), chromedp.SendKeys("#b-url", b.brokerURL, q),
		chromedp.SendKeys("#b-user", brokerUser, q), chromedp.SendKeys("#b-pass", brokerPass, q))
	br.leave(chromedp.Submit("#b-name", q))
	br.run(chromedp.WaitVisible("p.flash", q))
	if got := br.text("p.flash"); got != "Broker bindery registered: it offers 1 service and 3 plans." {
		t.Fatalf("the registration says %q", got)
	}
	br.waitText("tbody", "Ready", 10*time.Second)
	if strings.Contains(br.html(), brokerPass) {
		t.Fatal("the broker's password is in the page")
	}
	br.leave(chromedp.Click(`button[aria-label="Relist bindery"]`, q))
	br.run(chromedp.WaitVisible("p.flash", q))
	br.waitText("p.flash", "fetched again", time.Second)
	br.waitText("tbody", "3 plans", time.Second)
	br.axe("brokers")

	// The marketplace: the broker's service, search and filters (a plan's
	// words find its service).
	br.run(chromedp.Click(`nav a[href="/"]`, q), chromedp.WaitVisible("ul.cards", q))
	br.waitText("ul.cards", "PostgreSQL", time.Second)
	br.axe("marketplace")
	for _, query := range []string{"?price=paid", "?price=free", "?q=asynchronously", "?q=bindery", "?tag=relational&broker=bindery"} {
		br.run(chromedp.Navigate(b.url+"/"+query), chromedp.WaitVisible("ul.cards", q))
		if got := br.text("ul.cards"); !strings.Contains(got, "PostgreSQL") || !strings.Contains(got, "3 plans, free and paid") {
			t.Fatalf("marketplace %s: %q", query, got)
		}
	}
	br.run(chromedp.Navigate(b.url+"/?q=nothing-like-this"), chromedp.WaitVisible("div.empty", q))
	br.axe("marketplace-nothing-matches")
	// The service's page compares its plans; a plan's page has its
	// parameters.
	br.run(chromedp.Navigate(b.url+"/?tag=postgresql"), chromedp.WaitVisible("ul.cards", q))
	br.run(chromedp.Click(`ul.cards a`, q), chromedp.WaitVisible("table.compare", q))
	br.waitText("table.compare", "large-async", time.Second)
	br.axe("service")
	br.run(chromedp.Click(`//table[contains(@class,"compare")]//a[text()="small"]`, chromedp.BySearch), chromedp.WaitVisible("table.schema", q))
	br.waitText("table.schema", "statement_timeout_ms", time.Second)
	br.axe("plan")

	// Two more pages open on the lists, which follow what happens.
	instances, bindings := br.tab("instances"), br.tab("bindings")
	instances.run(chromedp.Navigate(b.url+"/instances"), chromedp.WaitVisible("div.empty", q))
	instances.axe("instances-empty")
	bindings.run(chromedp.Navigate(b.url+"/bindings"), chromedp.WaitVisible("div.empty", q))
	bindings.axe("bindings-empty")
	for _, tab := range []*browser{instances, bindings} {
		tab.run(chromedp.Evaluate(`window.stillHere = true`, nil))
	}

	// Provision from the generated form: an invalid value first.
	br.run(chromedp.Click(`a[href^="/instances/new"]`, q), chromedp.WaitVisible("#f-name", q))
	br.axe("instance-new")
	field := "#f-spec-parameters-statement-timeout-ms"
	br.run(chromedp.SendKeys("#f-name", "orders-db", q), chromedp.SendKeys(field, "0", q), chromedp.Submit("#f-name", q),
		chromedp.WaitVisible(field+"-error", q))
	if got := br.text(field + "-error"); !strings.Contains(got, "1") {
		t.Fatalf("the error next to the field says %q", got)
	}
	var described string
	br.run(chromedp.AttributeValue(field, "aria-describedby", &described, nil, q))
	if !strings.Contains(described, "-error") {
		t.Fatalf("the field is not described by its error: %q", described)
	}
	br.axe("instance-new-invalid")
	br.clear(field)
	br.run(chromedp.SendKeys(field, "5000", q), chromedp.Submit("#f-name", q),
		chromedp.WaitVisible("#instance-ready", q))
	if br.count("p.flash.until-ready") != 1 || !strings.Contains(br.text("p.flash"), "orders-db created") {
		t.Fatal("no notice of the creation")
	}

	// The page turns Ready by itself: the marker set now survives, so
	// there was no reload. So does the list in the other tab. The
	// creation's notice goes once it is Ready.
	br.run(chromedp.Evaluate(`window.stillHere = true`, nil))
	br.waitText("#instance-ready", "Ready", 20*time.Second)
	br.stillHere()
	// (htmx gives a swapped element its new class once it settles.)
	br.run(chromedp.WaitVisible("#instance-ready.good", q))
	if br.visible("p.flash") {
		t.Fatal("the creation's notice stays once the instance is Ready")
	}
	br.axe("instance-ready")
	instances.waitText("#instance-list", "orders-db", 5*time.Second)
	instances.waitText("#instance-list", "Ready", 5*time.Second)
	instances.stillHere()
	instances.axe("instances-live")

	// Change the parameters, from the form generated from the update
	// schema.
	br.clear(field)
	br.run(chromedp.SendKeys(field, "6000", q))
	br.leave(chromedp.Submit(field, q))
	br.run(chromedp.WaitVisible("p.flash", q))
	br.waitText("#instance-ready", "Ready", 20*time.Second)
	if v := br.eval(`document.querySelector("` + field + `").value`); v != "6000" {
		t.Fatalf("after the update the form shows %q", v)
	}

	// Change the plan to one the broker works on asynchronously, and back
	// to Ready without a reload.
	br.run(chromedp.Evaluate(`(() => { const s = document.querySelector("#f-plan");
		s.value = [...s.options].find(o => o.text === "large-async").value; })()`, nil))
	br.leave(chromedp.Submit("#f-plan", q))
	br.run(chromedp.WaitVisible("p.flash", q))
	br.run(chromedp.Evaluate(`window.stillHere = true`, nil))
	br.waitText(".meta", "large-async", 10*time.Second)
	br.waitText("#instance-ready", "Ready", 60*time.Second)
	br.waitText("#instance-operation", "none", 30*time.Second)
	br.stillHere()
	br.axe("instance-plan-changed")

	// Bind, and watch the binding become Ready, here and in the list.
	br.run(chromedp.SendKeys("#bind-name", "orders-app", q), chromedp.Submit("#bind-name", q), chromedp.WaitVisible("#binding-ready", q))
	br.waitText("#binding-ready", "Ready", 20*time.Second)
	br.axe("binding")
	bindings.waitText("#binding-list", "orders-app", 5*time.Second)
	bindings.waitText("#binding-list", "Ready", 5*time.Second)
	bindings.stillHere()
	bindings.axe("bindings-live")

	// The credentials are revealed only on request; then they work.
	before := br.html()
	br.run(chromedp.Click(`#credentials button`, q), chromedp.WaitVisible("table.creds", q))
	var creds map[string]string
	br.run(chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll("table.creds tr")].map(r => [r.querySelector("th").textContent, r.querySelector("code").textContent]))`, &creds))
	if creds["password"] == "" || creds["uri"] == "" {
		t.Fatalf("credentials shown: %v", keys(creds))
	}
	if strings.Contains(before, creds["password"]) {
		t.Fatal("the password was in the page before it was revealed")
	}
	if strings.Contains(br.html(), `="`+creds["password"]) {
		t.Fatal("the password is in an attribute")
	}
	br.axe("credentials")
	psql(t, creds["uri"])
	br.run(chromedp.Click(`button[data-copy]`, q))
	br.waitText("#copy-status", "C", 5*time.Second)
	if strings.Contains(b.logs.String(), creds["password"]) {
		t.Fatal("the password is in the log")
	}

	// The history of each object says what happened.
	var bindingURL, instanceURL string
	br.run(chromedp.Evaluate(`location.href`, &bindingURL), chromedp.Evaluate(`document.querySelector(".meta a").href`, &instanceURL))
	br.run(chromedp.Click(`a[href$="/events"]`, q))
	br.waitText("h1", "History of", 10*time.Second)
	br.waitText("table", "Bind", time.Second)
	br.axe("binding-history")
	br.run(chromedp.Navigate(instanceURL+"/events"), chromedp.WaitVisible("table", q))
	br.waitText("table", "Provision", time.Second)
	br.axe("instance-history")
	// The brokers table is live: its rows may be drawn again while the
	// page settles, so the link is found and followed in one step, and
	// the next page is waited for by what it says.
	br.run(chromedp.Navigate(b.url+"/brokers"), chromedp.WaitVisible(`a[aria-label="History of bindery"]`, q),
		chromedp.Evaluate(`document.querySelector('a[aria-label="History of bindery"]').click()`, nil))
	br.waitText("h1", "History of bindery", 10*time.Second)
	br.axe("broker-history")

	// The viewer sees but is offered nothing, and is refused by the server.
	br.run(chromedp.Click(`form.signout button`, q), chromedp.WaitVisible("#token", q))
	br.run(chromedp.SendKeys("#token", b.tokens["viewer"], q), chromedp.Submit("#token", q), chromedp.WaitVisible("ul.cards", q))
	br.run(chromedp.Navigate(bindingURL), chromedp.WaitVisible("#credentials", q))
	if got := br.text("#credentials"); !strings.Contains(got, "needs the developer role") {
		t.Fatalf("a viewer's credentials section says %q", got)
	}
	br.axe("binding-viewer")
	br.run(chromedp.Navigate(b.url+"/brokers"), chromedp.WaitVisible("table", q))
	if n := br.count("main form"); n != 0 {
		t.Fatalf("a viewer is offered %d forms on the brokers page", n)
	}
	br.axe("brokers-viewer")
	br.run(chromedp.Navigate(instanceURL), chromedp.WaitVisible("#instance-ready", q))
	if n := br.count("main form"); n != 0 || br.count(`a[href$="/delete"]`) != 0 {
		t.Fatalf("a viewer is offered %d forms on the instance page", n)
	}
	br.axe("instance-viewer")
	for _, p := range []string{"/instances/new?plan=x", strings.TrimPrefix(instanceURL, b.url) + "/delete", strings.TrimPrefix(bindingURL, b.url) + "/delete"} {
		br.run(chromedp.Navigate(b.url+p), chromedp.WaitVisible("h1", q))
		if got := br.text("main"); !strings.Contains(got, "needs the developer role") {
			t.Fatalf("a viewer asking for %s sees %q", p, got)
		}
	}
	// Sent anyway, from the signed-in page with its CSRF token, the
	// server refuses: the reveal, a deletion, a new instance.
	for _, p := range []string{strings.TrimPrefix(bindingURL, b.url) + "/reveal", strings.TrimPrefix(instanceURL, b.url) + "/delete", "/instances"} {
		var status int
		br.run(chromedp.Evaluate(`fetch(`+jsString(p)+`, {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
			body: new URLSearchParams({csrf: document.querySelector("input[name=csrf]").value, confirm: "orders-db", name: "x"})}).then(r => r.status)`,
			&status, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
		if status != http.StatusForbidden {
			t.Fatalf("a viewer's POST %s: %d, want 403", p, status)
		}
	}
	br.screenshot("viewer-refused")
	br.checkClean("viewer")

	// Back as admin: delete the binding, then the instance, each after
	// typing its name.
	br.run(chromedp.Click(`form.signout button`, q), chromedp.WaitVisible("#token", q),
		chromedp.SendKeys("#token", b.tokens["admin"], q), chromedp.Submit("#token", q), chromedp.WaitVisible("form.signout", q))
	br.run(chromedp.Navigate(bindingURL), chromedp.WaitVisible("#binding-ready", q),
		chromedp.Click(`a.danger[href$="/delete"]`, q), chromedp.WaitVisible("#confirm", q))
	br.axe("binding-delete-confirm")
	br.run(chromedp.Submit("#confirm", q), chromedp.WaitVisible("#confirm-error", q))
	br.axe("binding-delete-unconfirmed")
	br.run(chromedp.SendKeys("#confirm", "orders-app", q), chromedp.Submit("#confirm", q), chromedp.WaitVisible("p.flash", q))
	// The pages left open in the other tabs belonged to the session that
	// signed out: they say so at the next change, and follow nothing more
	// until loaded again.
	bindings.waitText(".live-ended", "Live updates have stopped", 10*time.Second)
	bindings.screenshot("session-ended")
	for _, tab := range []*browser{instances, bindings} {
		tab.run(chromedp.Reload(), chromedp.WaitVisible("h1", q), chromedp.Evaluate(`window.stillHere = true`, nil))
	}
	bindings.waitText("#binding-list", "No bindings yet", 20*time.Second)
	br.run(chromedp.Navigate(instanceURL), chromedp.WaitVisible("#instance-ready", q))
	br.waitText("#instance-bindings", "No bindings", 20*time.Second)
	br.run(chromedp.Click(`a.danger[href$="/delete"]`, q), chromedp.WaitVisible("#confirm", q))
	br.axe("instance-delete-confirm")
	br.run(chromedp.SendKeys("#confirm", "orders-db", q), chromedp.Submit("#confirm", q), chromedp.WaitVisible("p.flash", q))
	br.waitText("main", "No instances yet", 30*time.Second)
	instances.waitText("#instance-list", "No instances yet", 5*time.Second)
	instances.stillHere()
	bindings.stillHere()
	br.axe("instances-deleted")

	// A narrow window (a phone) still shows the pages usably.
	br.run(chromedp.EmulateViewport(390, 844))
	for _, p := range []string{"/", "/brokers", "/instances", "/bindings"} {
		br.run(chromedp.Navigate(b.url+p), chromedp.WaitVisible("h1", q))
		if wide := br.eval(`String(document.documentElement.scrollWidth > window.innerWidth + 1)`); wide == "true" {
			t.Errorf("%s scrolls sideways on a narrow window", p)
		}
		br.axe("narrow" + strings.ReplaceAll(p, "/", "-"))
	}
	instances.checkClean("instances tab")
	bindings.checkClean("bindings tab")
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// psql proves credentials work: a query over them with psql.
func psql(t *testing.T, uri string) {
	t.Helper()
	bin, err := exec.LookPath("psql")
	if err != nil {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
		if len(found) == 0 {
			t.Fatal("no psql: install it (apt-get install postgresql-client)")
		}
		bin = found[len(found)-1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--no-psqlrc", "-tA", "-d", uri, "-c", "SELECT current_user || ' ' || 40 + 2").CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), " 42") {
		t.Fatalf("psql with the revealed credentials: %v: %s", err, out)
	}
}

// leave runs actions that load another page (a form sent, a link
// followed) and waits until the page they left is gone, so that what is
// looked for next is not found on it.
func (b *browser) leave(actions ...chromedp.Action) {
	b.t.Helper()
	b.run(chromedp.Evaluate(`window.leaving = true`, nil))
	b.run(actions...)
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	for {
		var gone bool
		// Between two pages the evaluation may fail: then ask again.
		if err := chromedp.Run(ctx, chromedp.Evaluate(`window.leaving !== true && document.readyState !== "loading"`, &gone)); err == nil && gone {
			return
		}
		select {
		case <-ctx.Done():
			b.t.Fatal("the page was not left")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// eval evaluates a JavaScript expression of string value in the page.
func (b *browser) eval(js string) string {
	b.t.Helper()
	var s string
	b.run(chromedp.Evaluate(js, &s))
	return s
}

// count counts the elements a selector matches.
func (b *browser) count(sel string) int {
	b.t.Helper()
	var n int
	b.run(chromedp.Evaluate(`document.querySelectorAll(`+jsString(sel)+`).length`, &n))
	return n
}

// stillHere fails the test if the page was loaded again since
// window.stillHere was set.
func (b *browser) stillHere() {
	b.t.Helper()
	var still bool
	b.run(chromedp.Evaluate(`window.stillHere === true`, &still))
	if !still {
		b.t.Fatal("the page was loaded again")
	}
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
