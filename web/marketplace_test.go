package web_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestMarketplaceCache: the marketplace, served from its cache, shows a
// change of the catalogue at the next load, and the same page compressed
// (around a grid of cards compressed once) or not.
func TestMarketplaceCache(t *testing.T) {
	b := setup(t, setupOptions{})
	ctx := context.Background()
	services := osbtest.GenerateCatalog(2, 3)
	fake := osbtest.New(t, osbtest.WithCatalog(services))
	br := &catalog.Broker{}
	br.Name, br.Spec.URL = "fake", fake.URL()
	created, err := b.store.CreateBroker(ctx, br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Relist(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	viewer := b.client(t, catalog.RoleViewer)
	load := func(gz bool) string {
		t.Helper()
		req, _ := http.NewRequest("GET", b.url+"/?tag=fake", nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		} else {
			req.Header.Set("Accept-Encoding", "identity")
		}
		res, err := viewer.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || (res.Header.Get("Content-Encoding") == "gzip") != gz {
			t.Fatalf("load (gzip %v): %d, encoding %q", gz, res.StatusCode, res.Header.Get("Content-Encoding"))
		}
		if !gz {
			return string(raw)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("the compressed page does not read back: %v", err)
		}
		return string(plain)
	}
	first := load(true)
	if n := strings.Count(first, `class="card"`); n != 2 || strings.Count(first, "3 plans") != 2 {
		t.Fatalf("%d services shown, want 2 of 3 plans each", n)
	}
	if plain := load(false); plain != first {
		t.Fatal("the page differs with and without compression")
	}
	// Instances changing leave the catalogue's cached page in place; a
	// relist that adds a plan shows at once.
	plans, _ := b.store.ListPlans(ctx, catalog.PlanFilter{}, catalog.ListOptions{Limit: 1})
	b.instance(t, plans.Items[0], "default", "unrelated")
	if again := load(true); again != first {
		t.Fatal("an instance changed the marketplace")
	}
	services[0].Plans = append(services[0].Plans, osbtest.Plan{ID: "11111111-2222-3333-4444-555555555555", Name: "plan-new", Description: "Added later."})
	fake.SetCatalog(services)
	if _, err := b.store.Relist(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	after := load(true)
	if !strings.Contains(after, "4 plans") {
		t.Fatal("after the relist that added a plan, no service has 4 plans")
	}
	if load(false) != after {
		t.Fatal("the page differs with and without compression")
	}
}

// TestMarketplacePages: a large catalogue comes 100 services a page,
// whatever its size, with links to the pages before and after that keep
// the filters.
func TestMarketplacePages(t *testing.T) {
	b := setup(t, setupOptions{})
	b.fakeBroker(t, "many", osbtest.GenerateCatalog(250, 2))
	viewer := b.client(t, catalog.RoleViewer)
	for _, tc := range []struct {
		path        string
		cards       int
		count       string
		prev, next  string
		first, last string
	}{
		{"/?tag=fake", 100, "250 services, 1 to 100 shown", "", "/?tag=fake&amp;page=2", ">Fake Service 1<", ">Fake Service 100<"},
		{"/?tag=fake&page=2", 100, "101 to 200 shown", "/?tag=fake", "/?tag=fake&amp;page=3", ">Fake Service 101<", ">Fake Service 200<"},
		{"/?tag=fake&page=3", 50, "201 to 250 shown", "/?tag=fake&amp;page=2", "", ">Fake Service 201<", ">Fake Service 250<"},
	} {
		page := expect(t, tc.path, viewer.get(tc.path), http.StatusOK, tc.count, tc.first, tc.last)
		if n := strings.Count(page, `class="card"`); n != tc.cards {
			t.Errorf("%s: %d cards, want %d", tc.path, n, tc.cards)
		}
		if tc.prev != "" && !strings.Contains(page, `href="`+tc.prev+`" rel="prev"`) {
			t.Errorf("%s: no link to the page before, %s", tc.path, tc.prev)
		}
		if tc.next != "" && !strings.Contains(page, `href="`+tc.next+`" rel="next"`) {
			t.Errorf("%s: no link to the page after, %s", tc.path, tc.next)
		}
		if tc.next == "" && strings.Contains(page, `rel="next"`) {
			t.Errorf("%s: a link to a page after the last", tc.path)
		}
	}
}

// TestServiceIcon: a service's icon is served by Bindery as the catalog
// stored it at the relist (the broker's site is not asked again), with
// a sandboxing policy and an ETag the browser revalidates with; a
// service without one gets one drawn from its name.
func TestServiceIcon(t *testing.T) {
	b := setup(t, setupOptions{})
	ctx := context.Background()
	site, hits := iconSite(t)
	b.fakeBroker(t, "acme", showcaseCatalog(t, site.URL))
	fetched := hits.Load()
	viewer := b.client(t, catalog.RoleViewer)
	icon := func(classID, etag string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", b.url+"/services/"+classID+"/icon", nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		res, err := viewer.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, tc := range []struct{ class, ctype, starts string }{
		{"cache-id", "image/png", "\x89PNG"},
		{"queue-id", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect`},
		{"storage-id", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="14" fill="#0a7d5a">`},
		{"search-id", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64" width="64" height="64"><rect`},
	} {
		class, err := b.store.GetClass(ctx, tc.class)
		if err != nil {
			t.Fatal(err)
		}
		res := icon(class.ID, "")
		raw := body(t, res)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != tc.ctype || !strings.HasPrefix(raw, tc.starts) ||
			!strings.Contains(res.Header.Get("Content-Security-Policy"), "sandbox") || strings.Contains(raw, "script") {
			t.Errorf("%s: %d %s %q", tc.class, res.StatusCode, res.Header.Get("Content-Type"), raw[:min(len(raw), 120)])
			continue
		}
		if again := icon(class.ID, res.Header.Get("ETag")); again.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d", tc.class, again.StatusCode)
		}
	}
	mail, _ := b.store.GetClass(ctx, "mail-id")
	if raw := body(t, icon(mail.ID, "")); !strings.Contains(raw, ">M</text>") {
		t.Errorf("the drawn icon of mail: %q", raw)
	}
	if n := hits.Load(); n != fetched {
		t.Errorf("serving the icons asked the broker's site %d times", n-fetched)
	}
	anonymous := b.client(t, "")
	if res := anonymous.get("/services/" + mail.ID + "/icon"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("an icon without a session: %d", res.StatusCode)
	}
}
