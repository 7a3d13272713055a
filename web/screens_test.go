package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// screen is a page the screenshots walk, and what shows it is drawn.
type screen struct {
	name, path, ready string
}

// TestBrowserScreens walks the marketplace, a service, a plan, the
// instance form, the instances, an instance, the bindings, a binding, the
// brokers and a history, on a wide window (1280 px) and a phone (390 px),
// in the light and the dark: each page is checked with axe-core, must not
// scroll sideways, and is saved as a screenshot (`make screenshots`).
// The marketplace shows the broker's icons, served by Bindery: the
// browser asks no other site for anything.
func TestBrowserScreens(t *testing.T) {
	b := setup(t, setupOptions{broker: true, engine: true})
	ctx := context.Background()
	site, hits := iconSite(t)
	fake := osbtest.New(t, osbtest.WithCatalog(showcaseCatalog(t, site.URL)))
	acme := &catalog.Broker{}
	acme.Name, acme.Spec.URL = "acme", fake.URL()
	registerAndRelist(t, b, acme, nil)
	own := &catalog.Broker{}
	own.Name, own.Spec.URL = "bindery", b.brokerURL
	registerAndRelist(t, b, own, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: brokerUser, Password: brokerPass}})
	fetched := hits.Load()
	cache, err := b.store.GetClass(ctx, "cache-id")
	if err != nil {
		t.Fatal(err)
	}
	plans, err := b.store.ListPlans(ctx, catalog.PlanFilter{Broker: "bindery"}, catalog.ListOptions{Limit: 1})
	if err != nil || len(plans.Items) == 0 {
		t.Fatalf("bindery's plans: %v", err)
	}
	plan := plans.Items[0]
	in := b.instance(t, plan, "default", "orders-db")
	waitReady(t, func() ([]catalog.Condition, error) {
		got, err := b.store.GetInstance(ctx, in.ID)
		return got.Status.Conditions, err
	})
	bd := b.binding(t, in, "orders-app")
	waitReady(t, func() ([]catalog.Condition, error) {
		got, err := b.store.GetBinding(ctx, bd.ID)
		return got.Status.Conditions, err
	})

	br := newBrowser(t)
	q := chromedp.ByQuery
	br.run(chromedp.Navigate(b.url+"/login"), chromedp.WaitVisible("#token", q),
		chromedp.SendKeys("#token", b.tokens["admin"], q), chromedp.Submit("#token", q), chromedp.WaitVisible("ul.cards", q))
	screens := []screen{
		{"marketplace", "/", "ul.cards"},
		{"service", "/services/" + cache.ID, "table.compare"},
		{"plan", "/plans/" + plan.ID, "table.schema"},
		{"instance-new", "/instances/new?plan=" + plan.ID, "#f-name"},
		{"instances", "/instances", "#instance-list table"},
		{"instance", "/instances/" + in.ID, "#instance-ready"},
		{"bindings", "/bindings", "#binding-list table"},
		{"binding", "/bindings/" + bd.ID, "#binding-ready"},
		{"brokers", "/brokers", "main table"},
		{"history", "/instances/" + in.ID + "/events", "table.history"},
	}
	for _, dark := range []bool{false, true} {
		scheme := "light"
		if dark {
			scheme = "dark"
		}
		br.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}))
		for _, width := range []int64{1280, 390} {
			opts := []chromedp.EmulateViewportOption{}
			if width < 600 {
				opts = append(opts, chromedp.EmulateMobile)
			}
			br.run(chromedp.EmulateViewport(width, 844, opts...))
			for _, s := range screens {
				br.run(chromedp.Navigate(b.url+s.path), chromedp.WaitVisible(s.ready, q))
				// Against the window's width, not innerWidth: a phone's
				// page that is too wide is zoomed out to fit, which widens
				// innerWidth with it.
				if wide := br.eval(`String(document.documentElement.scrollWidth)`); wide != fmt.Sprint(width) {
					t.Errorf("%s at %d px is %s px wide", s.name, width, wide)
				}
				br.axe(fmt.Sprintf("%s-%d-%s", s.name, width, scheme))
			}
		}
	}

	// A history says when in words, in the reader's time zone.
	br.run(chromedp.Navigate(b.url+"/instances/"+in.ID+"/events"), chromedp.WaitVisible("table.history", q))
	if when := br.text("table.history time[data-when]"); when == "" || strings.Contains(when, "T") && strings.Contains(when, ":") && strings.Contains(when, "-") {
		t.Errorf("a history's time reads %q", when)
	}
	if cur := br.eval(`document.querySelector('.menu a[aria-current="page"]')?.getAttribute("href") ?? "none"`); cur != "/instances" {
		t.Errorf("an instance's history marks %s in the header", cur)
	}
	// The instances page offers a new one.
	br.run(chromedp.Navigate(b.url+"/instances"), chromedp.WaitVisible("#instance-list", q))
	if br.text(`.page-head a.button[href="/"]`) != "New instance" {
		t.Error("the instances page has no New instance button")
	}

	// On a phone the header is one line, its links behind a menu button.
	br.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}))
	br.run(chromedp.Navigate(b.url+"/instances"), chromedp.WaitVisible("#instance-list", q))
	var header float64
	br.run(chromedp.Evaluate(`document.querySelector("header.top").getBoundingClientRect().height`, &header))
	if header > 64 {
		t.Errorf("the header is %.0f px high on a phone", header)
	}
	if br.visible(`.menu a[href="/brokers"]`) {
		t.Error("the menu is open before it is asked for")
	}
	br.run(chromedp.Click(".menu-toggle", q))
	if !br.visible(`.menu a[href="/brokers"]`) || br.eval(`document.querySelector(".menu-toggle").getAttribute("aria-expanded")`) != "true" {
		t.Error("the menu button does not open the menu")
	}
	br.axe("menu-open-390-light")

	// A form's problems show next to their fields without widening a
	// phone's page.
	br.allow("status of 400")
	br.run(chromedp.Navigate(b.url+"/instances/new?plan="+plan.ID), chromedp.WaitVisible("#f-name", q),
		chromedp.SendKeys("#f-name", "Orders_DB", q), chromedp.Submit("#f-name", q), chromedp.WaitVisible("#f-name-error", q))
	if wide := br.eval(`String(document.documentElement.scrollWidth)`); wide != "390" {
		t.Errorf("the instance form with a problem is %s px wide at 390", wide)
	}
	br.axe("instance-new-problem-390-light")

	// The icons came from Bindery: the broker's site was asked at the
	// relist only, and the page asked no other site for anything.
	br.run(chromedp.EmulateViewport(1280, 900), chromedp.Navigate(b.url+"/"), chromedp.WaitVisible("ul.cards", q))
	var loaded []string
	br.run(chromedp.Evaluate(`(async () => {
		const imgs = [...document.querySelectorAll("ul.cards img.icon")].slice(0, 6);
		await Promise.all(imgs.map(i => i.decode().catch(() => null)));
		return imgs.map(i => i.getAttribute("src") + " " + i.naturalWidth);
	})()`, &loaded, awaitPromise))
	for _, l := range loaded {
		if strings.HasSuffix(l, " 0") {
			t.Errorf("icon %s did not load", l)
		}
	}
	var origins []string
	br.run(chromedp.Evaluate(`[...new Set(performance.getEntriesByType("resource").map(e => new URL(e.name).origin))]`, &origins))
	if len(origins) != 1 || origins[0] != b.url {
		t.Errorf("the marketplace asked %v", origins)
	}
	if n := hits.Load(); n != fetched {
		t.Errorf("the icon site was asked %d times after the relist", n-fetched)
	}
}

// registerAndRelist registers a broker and fetches its catalogue.
func registerAndRelist(t *testing.T, b *bundle, br *catalog.Broker, auth *catalog.BrokerAuth) {
	t.Helper()
	created, err := b.store.CreateBroker(context.Background(), br, auth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Relist(context.Background(), created.ID); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits until the conditions read say Ready.
func waitReady(t *testing.T, read func() ([]catalog.Condition, error)) {
	t.Helper()
	err := eventually.Poll(context.Background(), 60*time.Second, func(context.Context) error {
		conds, err := read()
		if err != nil {
			return err
		}
		if r, ok := catalog.FindCondition(conds, catalog.ConditionReady); !ok || r.Status != catalog.ConditionTrue {
			return fmt.Errorf("not ready: %+v", conds)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }
