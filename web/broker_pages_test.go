package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// brokerRow finds the names of the brokers a brokers page lists.
var brokerRow = regexp.MustCompile(`<tr>\s*<th scope="row">([^<]*)</th>`)

// nextPage finds a page's link to the next.
var nextPage = regexp.MustCompile(`<a href="([^"]*)" rel="next">`)

// TestBrokerPages: the brokers page, its live stream and the
// marketplace's broker filter read a page of brokers, never all of them:
// the list comes 50 to a page (the cluster's brokers first, then the
// namespaces' by namespace and name) with a link to the next, and the
// filter offers the first 100 and takes any other typed in.
func TestBrokerPages(t *testing.T) {
	b := setup(t, setupOptions{})
	var want []string
	for i := range 101 {
		want = append(want, b.register(t, "", fmt.Sprintf("b-%03d", i)))
	}
	want = append(want, b.register(t, "team-a", "b-own"), b.register(t, "team-b", "b-own"))
	viewer := b.client(t, catalog.RoleViewer)

	var seen []string
	sizes := []int{}
	for path := "/brokers"; path != ""; {
		res := viewer.get(path)
		page := body(t, res)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		rows := brokerRow.FindAllStringSubmatch(page, -1)
		sizes = append(sizes, len(rows))
		for _, r := range rows {
			seen = append(seen, r[1])
		}
		path = ""
		if m := nextPage.FindStringSubmatch(page); m != nil {
			path = html.UnescapeString(m[1])
		}
		if len(sizes) > 5 {
			t.Fatalf("pages of %v and more", sizes)
		}
	}
	if fmt.Sprint(sizes) != "[50 50 3]" || strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Errorf("pages of %v: %v", sizes, seen)
	}

	if rows := brokerRow.FindAllString(firstEvent(t, viewer, "/live/brokers?limit=2").Data, -1); len(rows) != 2 {
		t.Errorf("the stream of a page of 2 sent %d rows", len(rows))
	}

	market := body(t, viewer.get("/"))
	if n := strings.Count(market, `<option value="b-`); n != 100 {
		t.Errorf("the broker filter offers %d brokers", n)
	}
	if !strings.Contains(market, `<input id="broker" name="broker" list="broker-choices"`) {
		t.Error("past 100 brokers, the broker filter takes no typed name")
	}
}

// register records a broker of namespace ns ("" for the cluster's), and
// returns its name as the brokers page lists it.
func (b *bundle) register(t *testing.T, ns, name string) string {
	t.Helper()
	br := &catalog.Broker{}
	br.Name, br.Namespace, br.Spec.URL = name, ns, "http://127.0.0.1:1"
	if _, err := b.store.CreateBroker(t.Context(), br, nil); err != nil {
		t.Fatal(err)
	}
	return name
}

// firstEvent is the first event of a live stream.
func firstEvent(t *testing.T, c *client, path string) event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	res, err := c.http.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	events := make(chan event, 1)
	go readEvents(res.Body, events)
	ev, ok := <-events
	if !ok {
		t.Fatalf("GET %s sent no event", path)
	}
	return ev
}
