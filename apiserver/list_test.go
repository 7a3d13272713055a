package apiserver_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/bindery-dev/bindery/catalog"
)

// httpGet is a GET of the server's API with the kubeconfig's credentials.
type httpGet struct {
	t      testing.TB
	client *http.Client
	host   string
}

func newHTTPGet(t testing.TB, b *bundle) httpGet {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return httpGet{t: t, client: client, host: cfg.Host}
}

// get returns the response's status, headers and body (gunzipped).
func (g httpGet) get(path, accept string, gzipped bool) (int, http.Header, []byte) {
	g.t.Helper()
	req, _ := http.NewRequest("GET", g.host+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if gzipped {
		// Set by hand, Go's transport leaves the body compressed.
		req.Header.Set("Accept-Encoding", "gzip")
	}
	res, err := g.client.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	var r io.Reader = res.Body
	if res.Header.Get("Content-Encoding") == "gzip" {
		if r, err = gzip.NewReader(res.Body); err != nil {
			g.t.Fatal(err)
		}
	}
	body, err := io.ReadAll(r)
	if err != nil {
		g.t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode, res.Header, body
}

const (
	acceptTable    = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	acceptTableV1b = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
	acceptPartial  = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
	acceptYAML     = "application/yaml"
	acceptTableYML = "application/yaml;as=Table;v=v1;g=meta.k8s.io"
)

// decodeDoc decodes a JSON or YAML document, with what may differ between
// two reads of the same list made apart: a Table row's age cell, and an
// empty array's form (null or []).
func decodeDoc(t testing.TB, body []byte, isYAML bool) map[string]any {
	t.Helper()
	if isYAML {
		var err error
		if body, err = yaml.YAMLToJSON(body); err != nil {
			t.Fatalf("%v\n%s", err, body)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v\n%.500s", err, body)
	}
	for _, key := range []string{"items", "rows"} {
		if v, ok := doc[key]; ok && v == nil {
			doc[key] = []any{}
		}
	}
	rows, _ := doc["rows"].([]any)
	for _, r := range rows {
		cells := r.(map[string]any)["cells"].([]any)
		cells[len(cells)-1] = "age"
	}
	return doc
}

// TestListEncodings lists each resource in every form kubectl and clients
// ask for (the objects, their Table, their metadata; JSON and YAML),
// unpaged and in pages of more than pageRead, and checks each against
// what k8s.io/apiserver's own list handler writes for the same list (a
// pretty page, which the server leaves to it).
func TestListEncodings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newHTTPGet(t, b)
	createInstances(t, b.store, 40, "fake-service", "sync")
	bindAll(t, b.store, 40)
	for _, resource := range []string{"serviceinstances", "servicebindings", "clusterserviceclasses", "clusterserviceplans", "clusterservicebrokers"} {
		for _, accept := range []string{"", acceptTable, acceptTableV1b, acceptPartial, acceptYAML, acceptTableYML} {
			for _, query := range []string{"", "labelSelector=team%3Dt3", "includeObject=Object", "includeObject=None"} {
				t.Run(fmt.Sprintf("%s/%s/%s", resource, accept, query), func(t *testing.T) {
					isYAML := strings.HasPrefix(accept, "application/yaml")
					base := "/apis/servicecatalog.k8s.io/v1beta1/" + resource + "?" + query
					code, _, ref := g.get(base+"&limit=500&pretty=true", accept, false)
					if code != http.StatusOK {
						t.Fatalf("reference: %d %s", code, ref)
					}
					want := decodeDoc(t, ref, isYAML)
					for _, path := range []string{base, base + "&limit=0", base + "&limit=5000"} {
						code, h, body := g.get(path, accept, true)
						if code != http.StatusOK {
							t.Fatalf("%s: %d %s", path, code, body)
						}
						if ct, wantCT := h.Get("Content-Type"), map[bool]string{false: "application/json", true: "application/yaml"}[isYAML]; ct != wantCT {
							t.Errorf("%s: Content-Type %q, want %q", path, ct, wantCT)
						}
						if got := decodeDoc(t, body, isYAML); !reflect.DeepEqual(got, want) {
							gj, _ := json.Marshal(got)
							wj, _ := json.Marshal(want)
							t.Errorf("%s:\n got %.2000s\nwant %.2000s", path, gj, wj)
						}
					}
				})
			}
		}
	}
}

// bindAll creates a binding of each of the n instances createInstances made.
func bindAll(t testing.TB, store *catalog.Store, n int) {
	t.Helper()
	createBindings(t, store, n)
}

// TestListPagesAndErrors reads 1,100 instances in pages larger than a
// chunk, unpaged (objects and Table), and with a bad selector (a Status,
// before any byte of a list).
func TestListPagesAndErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newHTTPGet(t, b)
	createInstances(t, b.store, 1100, "fake-service", "sync")
	type list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Continue        string `json:"continue"`
		} `json:"metadata"`
		Items []struct {
			Metadata struct{ Name, Namespace string } `json:"metadata"`
		} `json:"items"`
	}
	read := func(path string) list {
		t.Helper()
		code, _, body := g.get(path, "", true)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var l list
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return l
	}
	const base = "/apis/servicecatalog.k8s.io/v1beta1/serviceinstances"
	all := read(base)
	if len(all.Items) != 1100 || all.Metadata.Continue != "" || all.Metadata.ResourceVersion == "" {
		t.Fatalf("unpaged: %d items, continue %q, resourceVersion %q", len(all.Items), all.Metadata.Continue, all.Metadata.ResourceVersion)
	}
	var paged []string
	var token string // the first page's continue token
	for cont, n := "", 0; ; n++ {
		l := read(base + "?limit=700&continue=" + cont)
		if n == 0 {
			token = l.Metadata.Continue
		}
		for _, it := range l.Items {
			paged = append(paged, it.Metadata.Namespace+"/"+it.Metadata.Name)
		}
		if want := []int{700, 400}[n]; len(l.Items) != want {
			t.Errorf("page %d: %d items, want %d", n, len(l.Items), want)
		}
		if cont = l.Metadata.Continue; cont == "" {
			break
		}
	}
	for i, it := range all.Items {
		if i >= len(paged) || paged[i] != it.Metadata.Namespace+"/"+it.Metadata.Name {
			t.Fatalf("pages differ from the unpaged list at %d", i)
		}
	}
	// The Table kubectl asks for, unpaged over several chunks, reads only
	// the members its cells show: its cells are those of the Table of
	// whole objects (includeObject=Object), the age aside.
	cells := func(path string) [][]any {
		t.Helper()
		code, _, body := g.get(path, acceptTable, true)
		var table struct{ Rows []struct{ Cells []any } }
		if err := json.Unmarshal(body, &table); code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %v", path, code, err)
		}
		out := make([][]any, len(table.Rows))
		for i, r := range table.Rows {
			out[i] = r.Cells[:len(r.Cells)-1]
		}
		return out
	}
	if got, want := cells(base), cells(base+"?includeObject=Object"); len(got) != 1100 || !reflect.DeepEqual(got, want) {
		t.Errorf("the unpaged Table's %d rows differ from those of whole objects (%d)", len(got), len(want))
	}
	for path, want := range map[string]int{
		base + "?labelSelector=a%3D%3D%3Db":              http.StatusBadRequest,
		base + "?fieldSelector=spec.nothing%3Dx":         http.StatusBadRequest,
		base + "?continue=not-a-token":                   http.StatusBadRequest,
		"/apis/servicecatalog.k8s.io/v1beta1/nothing":    http.StatusNotFound,
		base + "?limit=5000&labelSelector=team%3Dt7&x=1": http.StatusOK,
	} {
		checkListStatus(t, g, path, want)
	}
	// The resource version semantics of a list: the catalog serves its
	// newest revision, which is at least as new as any it gave, and no
	// older one exactly; each of the three ways a list is read (in chunks,
	// a page, k8s.io/apiserver's handler for a pretty one).
	rev, _ := strconv.ParseInt(all.Metadata.ResourceVersion, 10, 64)
	for _, way := range []string{"", "&limit=5", "&pretty=true"} {
		for query, want := range map[string]int{
			"?resourceVersion=abc":                                                         http.StatusBadRequest,
			"?resourceVersion=-1":                                                          http.StatusBadRequest,
			fmt.Sprintf("?resourceVersion=%d", rev+1000):                                   http.StatusGatewayTimeout,
			"?resourceVersion=1&resourceVersionMatch=Exact":                                http.StatusGone,
			fmt.Sprintf("?resourceVersion=%d&resourceVersionMatch=Exact", rev):             http.StatusOK,
			"?resourceVersion=1&resourceVersionMatch=NotOlderThan":                         http.StatusOK,
			fmt.Sprintf("?resourceVersion=%d&resourceVersionMatch=NotOlderThan", rev+1000): http.StatusGatewayTimeout,
			"?resourceVersion=0":                                                           http.StatusOK,
			// A continued list is read as its first page was: a
			// resourceVersion with continue is refused, as kube-apiserver
			// does.
			fmt.Sprintf("?continue=%s&resourceVersion=%d", token, rev): http.StatusBadRequest,
			"?continue=" + token + "&resourceVersion=0":                http.StatusOK,
		} {
			checkListStatus(t, g, base+query+way, want)
		}
	}
}

// checkListStatus checks that a list answers want, and a Status when it
// is not 200.
func checkListStatus(t *testing.T, g httpGet, path string, want int) {
	t.Helper()
	code, h, body := g.get(path, "", false)
	if code != want {
		t.Errorf("%s: %d %.300s, want %d", path, code, body, want)
	}
	if code != http.StatusOK && !strings.Contains(string(body), `"kind":"Status"`) && !strings.Contains(string(body), `"kind": "Status"`) {
		t.Errorf("%s: %s (%s), want a Status", path, body, h.Get("Content-Type"))
	}
}

// TestWatchListOverChunks watches as client-go's reflectors do
// (sendInitialEvents): 1,100 instances, more than a chunk, arrive as
// ADDED, then the bookmark that ends the initial events, then a change
// made after them.
func TestWatchListOverChunks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	createInstances(t, b.store, 1100, "fake-service", "sync")
	yes := true
	w, err := b.client.ServicecatalogV1beta1().ServiceInstances("").Watch(ctx, metav1.ListOptions{
		SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	added := map[string]bool{}
	var mark string
	for ev := range w.ResultChan() {
		m, _ := meta.Accessor(ev.Object)
		switch {
		case ev.Type == watch.Added && mark == "":
			added[m.GetNamespace()+"/"+m.GetName()] = true
		case ev.Type == watch.Bookmark && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true":
			mark = m.GetResourceVersion()
			if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("team-0").Create(ctx, newInstance("team-0", "late"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case ev.Type == watch.Added && m.GetName() == "late":
			rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
			at, _ := strconv.ParseInt(mark, 10, 64)
			if len(added) != 1100 || rv <= at {
				t.Errorf("%d initial events, bookmark at %s, then late at %d", len(added), mark, rv)
			}
			return
		case ev.Type == watch.Error:
			t.Fatalf("watch failed: %v", ev.Object)
		}
	}
	t.Fatal("the watch ended")
}
