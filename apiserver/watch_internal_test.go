package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/catalog"
)

// TestWatchersShareOneEncoding: through the real server, watchers of one
// change that ask for the same encoding get byte-identical frames from one
// encoding of it, whatever their selectors; a Table watch (kubectl get -w)
// gets its own encoding, with Table rows, the column definitions in its
// first event only, and a metadata watch its own, of metadata; a label
// selector still filters.
func TestWatchersShareOneEncoding(t *testing.T) {
	t.Parallel()
	store := NewTestStore(t)
	RegisterFakeBroker(t, store)
	srv, hc, base := serveForTest(t, store)
	create := func(name string, labels map[string]string) {
		t.Helper()
		in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
		in.Name, in.Namespace, in.Labels = name, "team", labels
		if _, err := store.CreateInstance(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	from, err := store.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("%s/apis/servicecatalog.k8s.io/v1beta1/namespaces/team/serviceinstances?watch=true&resourceVersion=%d", base, from)
	all := openWatch(t, hc, path, "application/json")
	gold := openWatch(t, hc, path+"&labelSelector=tier%3Dgold", "application/json")
	table := openWatch(t, hc, path, "application/json;as=Table;v=v1;g=meta.k8s.io")
	metadata := openWatch(t, hc, path, "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
	// Once a watch has sent db-0 (from the feed's backlog or from the
	// hub), it follows the hub: what comes next is the hub's shared
	// change.
	create("db-0", map[string]string{"tier": "gold"})
	all.next(t, "ADDED")
	gold.next(t, "ADDED")
	checkTableEvent(t, table.next(t, "ADDED"), "db-0", true)
	checkMetadataEvent(t, metadata.next(t, "ADDED"), "db-0")

	before := srv.hub.encoded.Load()
	create("db-1", map[string]string{"tier": "gold"})
	a, g := all.next(t, "ADDED"), gold.next(t, "ADDED")
	if !bytes.Equal(a, g) {
		t.Errorf("two watchers of one change got different frames:\n%s\n%s", a, g)
	}
	if name := instanceName(t, a); name != "db-1" {
		t.Errorf("ADDED %q, want db-1", name)
	}
	checkTableEvent(t, table.next(t, "ADDED"), "db-1", false)
	checkMetadataEvent(t, metadata.next(t, "ADDED"), "db-1")
	// One encoding for the two JSON watchers, one for the Table, one for
	// the metadata.
	if n := srv.hub.encoded.Load() - before; n != 3 {
		t.Errorf("%d encodings of one change for two JSON watchers, a Table and a metadata watcher, want 3", n)
	}

	// Not gold: the selector's watcher skips it.
	create("db-2", nil)
	create("db-3", map[string]string{"tier": "gold"})
	for _, want := range []string{"db-2", "db-3"} {
		if name := instanceName(t, all.next(t, "ADDED")); name != want {
			t.Errorf("ADDED %q, want %s", name, want)
		}
		checkTableEvent(t, table.next(t, "ADDED"), want, false)
	}
	if name := instanceName(t, gold.next(t, "ADDED")); name != "db-3" {
		t.Errorf("the label selector's watcher got %q, want db-3", name)
	}
}

// serveForTest runs the server on store until t ends and returns it, an
// HTTP client with its kubeconfig's credentials and its URL.
func serveForTest(t *testing.T, store *catalog.Store) (*Server, *http.Client, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{Listener: l, DataDir: filepath.Join(t.TempDir(), "apiserver")}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(store, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := cfg.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(o.DataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	// Ready once the group is served.
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := hc.Get(rc.Host + "/apis/servicecatalog.k8s.io/v1beta1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not serve within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return srv, hc, rc.Host
}

// rawWatch is a watch's response, read a frame (a line of JSON) at a time.
type rawWatch struct {
	r      *bufio.Reader
	frames chan []byte
}

func openWatch(t *testing.T, hc *http.Client, url, accept string) *rawWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %s", url, resp.Status)
	}
	w := &rawWatch{r: bufio.NewReader(resp.Body), frames: make(chan []byte, 64)}
	go func() {
		defer close(w.frames)
		for {
			line, err := w.r.ReadBytes('\n')
			if err != nil {
				return
			}
			w.frames <- line
		}
	}()
	return w
}

// next returns the next frame, which must be of type typ.
func (w *rawWatch) next(t *testing.T, typ string) []byte {
	t.Helper()
	select {
	case f, ok := <-w.frames:
		if !ok {
			t.Fatalf("the watch ended before a %s event", typ)
		}
		var ev struct{ Type string }
		if err := json.Unmarshal(f, &ev); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		if ev.Type != typ {
			t.Fatalf("got %s, want %s: %s", ev.Type, typ, f)
		}
		return f
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s event within 20s", typ)
		return nil
	}
}

func instanceName(t *testing.T, frame []byte) string {
	t.Helper()
	var ev struct {
		Object struct {
			Kind     string
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal(frame, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Object.Kind != "ServiceInstance" {
		t.Fatalf("kind %q, want ServiceInstance: %s", ev.Object.Kind, frame)
	}
	return ev.Object.Metadata.Name
}

// checkMetadataEvent checks that a metadata watch's frame holds the
// object's metadata only.
func checkMetadataEvent(t *testing.T, frame []byte, name string) {
	t.Helper()
	var ev struct {
		Object map[string]json.RawMessage
	}
	if err := json.Unmarshal(frame, &ev); err != nil {
		t.Fatal(err)
	}
	var meta struct{ Name string }
	if err := json.Unmarshal(ev.Object["metadata"], &meta); err != nil {
		t.Fatal(err)
	}
	_, spec := ev.Object["spec"]
	if string(ev.Object["kind"]) != `"PartialObjectMetadata"` || meta.Name != name || spec {
		t.Fatalf("want the metadata of %s: %s", name, frame)
	}
}

// checkTableEvent checks that a Table watch's frame holds one row, the
// object name's, with the column definitions when headers is true.
func checkTableEvent(t *testing.T, frame []byte, name string, headers bool) {
	t.Helper()
	var ev struct {
		Object struct {
			Kind              string
			ColumnDefinitions []struct{ Name string }
			Rows              []struct{ Cells []any }
		}
	}
	if err := json.Unmarshal(frame, &ev); err != nil {
		t.Fatal(err)
	}
	o := ev.Object
	if o.Kind != "Table" || len(o.Rows) != 1 || len(o.Rows[0].Cells) == 0 || o.Rows[0].Cells[0] != name {
		t.Fatalf("want a Table of one row for %s: %s", name, frame)
	}
	if got := len(o.ColumnDefinitions) > 0; got != headers {
		t.Errorf("%s: column definitions %v, want %v: %s", name, got, headers, frame)
	}
}

// TestWatchHandOverInOrder: with the hub handing changes over to clients
// that wait and queueing them for clients that are busy, and bookmarks
// every millisecond, every watch gets every change it selects once, in
// revision order, and no bookmark goes back or comes before a change it
// covers.
func TestWatchHandOverInOrder(t *testing.T) {
	t.Parallel()
	storages, store := storagesForTest(t)
	st := *storageOf(storages["serviceinstances"])
	st.bookmarkEvery = time.Millisecond
	ctx := genericapirequest.WithNamespace(genericapirequest.NewContext(), "team")
	from, err := store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 60
	var g errgroup.Group
	for i := range 8 {
		opts := &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(from, 10), AllowWatchBookmarks: true}
		want := writers * each
		if i%2 == 1 {
			opts.LabelSelector = labels.SelectorFromSet(labels.Set{"parity": "odd"})
			want /= 2
		}
		w, err := st.Watch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		// Half the watches read slowly: the hub queues for them.
		slow := i%4 >= 2
		g.Go(func() error { return checkWatchOrder(w, want, slow) })
	}
	var wg errgroup.Group
	for n := range writers {
		wg.Go(func() error {
			for i := range each {
				in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
				in.Name, in.Namespace = fmt.Sprintf("w%d-%d", n, i), "team"
				if i%2 == 1 {
					in.Labels = map[string]string{"parity": "odd"}
				}
				if _, err := store.CreateInstance(ctx, in); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := wg.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// checkWatchOrder reads a watch until it has seen want ADDED events, and
// fails on a change seen twice, not newer than the one before it (every
// change has a revision of its own) or at or before a bookmark already
// sent (a client resuming from the bookmark would miss it), and on a
// bookmark older than a change or a bookmark.
func checkWatchOrder(w watch.Interface, want int, slow bool) error {
	var lastEvent, lastMark int64
	seen := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for len(seen) < want {
		var ev watch.Event
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch ended after %d of %d changes", len(seen), want)
			}
			ev = e
		case <-timeout:
			return fmt.Errorf("%d of %d changes within 30s", len(seen), want)
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return err
		}
		rev, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
		if err != nil {
			return err
		}
		switch ev.Type {
		case watch.Bookmark:
			if rev < lastMark || rev < lastEvent {
				return fmt.Errorf("bookmark %d after bookmark %d and change %d", rev, lastMark, lastEvent)
			}
			lastMark = rev
		case watch.Added:
			if rev <= lastEvent || rev <= lastMark || seen[m.GetName()] {
				return fmt.Errorf("%s at %d after change %d and bookmark %d (seen before: %v)", m.GetName(), rev, lastEvent, lastMark, seen[m.GetName()])
			}
			lastEvent = rev
			seen[m.GetName()] = true
		default:
			return fmt.Errorf("unexpected %s", ev.Type)
		}
		if slow {
			time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		}
	}
	return nil
}
