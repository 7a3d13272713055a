package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
)

// TestBrowserFlow is the whole life of a database in a real browser: sign
// in, register Bindery's own broker, provision from the generated form
// (an invalid field first), watch it become Ready without a reload, bind,
// reveal the credentials and connect with them, delete; then the same
// pages as a viewer, who is offered none of it.
func TestBrowserFlow(t *testing.T) {
	b := setup(t, setupOptions{broker: true, engine: true})
	br := newBrowser(t)
	q := chromedp.ByQuery

	// Every page needs a session: the browser lands on the sign-in form.
	br.run(chromedp.Navigate(b.url+"/"), chromedp.WaitVisible("#token", q))
	br.axe("login")
	// Refusals answer 4xx, which the browser logs; these are expected.
	br.allow("status of 401", "status of 400", "status of 403")
	br.run(chromedp.SendKeys("#token", "bdy_wrong", q), chromedp.Submit("#token", q), chromedp.WaitVisible("#token-error", q))
	if got := br.text("#token-error"); !strings.Contains(got, "not valid") {
		t.Fatalf("wrong token: %q", got)
	}
	br.run(chromedp.SendKeys("#token", b.tokens["admin"], q), chromedp.Submit("#token", q),
		chromedp.WaitVisible("div.empty", q))
	if got := br.text("div.empty"); !strings.Contains(got, "Register a broker") {
		t.Fatalf("empty marketplace says %q", got)
	}
	if strings.Contains(br.html(), b.tokens["admin"]) {
		t.Fatal("the token is in the page")
	}
	br.axe("marketplace-empty")

	// Register the broker.
	br.run(chromedp.Click(`a[href="/brokers"]`, q), chromedp.WaitVisible("#b-name", q))
	br.axe("brokers-empty")
	br.run(chromedp.SendKeys("#b-name", "bindery", q), chromedp.SendKeys("#b-url", b.brokerURL, q),
		chromedp.SendKeys("#b-user", brokerUser, q), chromedp.SendKeys("#b-pass", brokerPass, q),
		chromedp.Submit("#b-name", q), chromedp.WaitVisible("p.flash", q))
	br.waitText("tbody", "Ready", 10*time.Second)
	if strings.Contains(br.html(), brokerPass) {
		t.Fatal("the broker's password is in the page")
	}
	br.axe("brokers")

	// The marketplace lists the broker's service and plans.
	br.run(chromedp.Click(`nav a[href="/"]`, q), chromedp.WaitVisible("table.market", q))
	br.waitText("table.market", "postgresql", time.Second)
	br.axe("marketplace")
	br.run(chromedp.Navigate(b.url+"/?price=paid"), chromedp.WaitVisible("table.market", q))
	if got := br.text("table.market"); !strings.Contains(got, "large-async") || strings.Contains(got, "small") {
		t.Fatalf("paid plans: %q", got)
	}
	br.run(chromedp.Navigate(b.url+"/?q=nothing-like-this"), chromedp.WaitVisible("div.empty", q))
	br.run(chromedp.Navigate(b.url+"/?tag=postgresql"), chromedp.WaitVisible("table.market", q))
	br.run(chromedp.Click(`//table[contains(@class,"market")]//a[text()="small"]`, chromedp.BySearch), chromedp.WaitVisible("table.schema", q))
	br.waitText("table.schema", "statement_timeout_ms", time.Second)
	br.axe("plan")

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

	// The page turns Ready by itself: the marker set now survives, so
	// there was no reload.
	br.run(chromedp.Evaluate(`window.stillHere = true`, nil))
	br.waitText("#instance-ready", "Ready", 20*time.Second)
	var still bool
	br.run(chromedp.Evaluate(`window.stillHere === true`, &still))
	if !still {
		t.Fatal("the page reloaded")
	}
	br.axe("instance-ready")

	// Update the parameters from the form generated from the update schema.
	br.clear(field)
	br.run(chromedp.SendKeys(field, "6000", q), chromedp.Submit(field, q), chromedp.WaitVisible("p.flash", q))
	br.waitText("#instance-ready", "Ready", 20*time.Second)
	var value string
	br.run(chromedp.Value(field, &value, q))
	if value != "6000" {
		t.Fatalf("after the update the form shows %q", value)
	}

	// Bind, and watch the binding become Ready.
	br.run(chromedp.SendKeys("#bind-name", "orders-app", q), chromedp.Submit("#bind-name", q), chromedp.WaitVisible("#binding-ready", q))
	br.waitText("#binding-ready", "Ready", 20*time.Second)
	br.axe("binding")

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
	connect(t, creds["uri"])
	br.run(chromedp.Click(`button[data-copy]`, q))
	br.waitText("#copy-status", "C", 5*time.Second)
	if strings.Contains(b.logs.String(), creds["password"]) {
		t.Fatal("the password is in the log")
	}

	// The history shows what happened.
	br.run(chromedp.Click(`a[href$="/events"]`, q))
	br.waitText("h1", "History of", 10*time.Second)
	br.axe("binding-history")

	// The viewer sees but is offered nothing, and is refused by the server.
	var bindingURL string
	br.run(chromedp.Evaluate(`document.querySelector(".crumbs a").href`, &bindingURL))
	br.run(chromedp.Click(`form.signout button`, q), chromedp.WaitVisible("#token", q))
	br.run(chromedp.SendKeys("#token", b.tokens["viewer"], q), chromedp.Submit("#token", q), chromedp.WaitVisible("table.market", q))
	br.run(chromedp.Navigate(bindingURL), chromedp.WaitVisible("#credentials", q))
	if got := br.text("#credentials"); !strings.Contains(got, "needs the developer role") {
		t.Fatalf("a viewer's credentials section says %q", got)
	}
	br.axe("binding-viewer")
	br.run(chromedp.Navigate(b.url+"/brokers"), chromedp.WaitVisible("table", q))
	var forms int
	br.run(chromedp.Evaluate(`document.querySelectorAll("main form").length`, &forms))
	if forms != 0 {
		t.Fatalf("a viewer is offered %d forms on the brokers page", forms)
	}
	var instanceURL string
	br.run(chromedp.Navigate(b.url+"/instances"), chromedp.WaitVisible("tbody a", q),
		chromedp.Evaluate(`document.querySelector("tbody a").href`, &instanceURL))
	br.run(chromedp.Navigate(instanceURL), chromedp.WaitVisible("#instance-ready", q))
	br.run(chromedp.Evaluate(`document.querySelectorAll("main form").length`, &forms))
	if forms != 0 {
		t.Fatalf("a viewer is offered %d forms on the instance page", forms)
	}
	br.axe("instance-viewer")
	br.run(chromedp.Navigate(b.url+"/instances/new?plan=x"), chromedp.WaitVisible("h1", q))
	if got := br.text("main"); !strings.Contains(got, "needs the developer role") {
		t.Fatalf("a viewer asking for the create form sees %q", got)
	}
	br.checkClean("viewer")

	// Back as admin: delete the binding, then the instance.
	br.run(chromedp.Click(`form.signout button`, q), chromedp.WaitVisible("#token", q),
		chromedp.SendKeys("#token", b.tokens["admin"], q), chromedp.Submit("#token", q), chromedp.WaitVisible("form.signout", q))
	br.run(chromedp.Navigate(bindingURL), chromedp.WaitVisible("#binding-ready", q),
		chromedp.Click(`form[action$="/delete"] button`, q), chromedp.WaitVisible("p.flash", q))
	br.run(chromedp.Navigate(instanceURL), chromedp.WaitVisible("#instance-ready", q))
	br.waitText("#instance-bindings", "No bindings", 20*time.Second)
	br.run(chromedp.Click(`form[action$="/delete"] button`, q), chromedp.WaitVisible("p.flash", q))
	br.waitText("main", "No instances any more", 20*time.Second)
	br.axe("instances-empty")

	// A narrow window (a phone) still shows the marketplace usably.
	br.run(chromedp.EmulateViewport(390, 844), chromedp.Navigate(b.url+"/"), chromedp.WaitVisible("table.market", q))
	var overflow bool
	br.run(chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow))
	if overflow {
		t.Error("the marketplace scrolls sideways on a narrow window")
	}
	br.axe("marketplace-narrow")
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// connect proves credentials work: a query over them.
func connect(t *testing.T, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, uri)
	if err != nil {
		t.Fatalf("connect with the revealed credentials: %v", err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query with the revealed credentials: %v", err)
	}
}
