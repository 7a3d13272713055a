package restapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/openapi/openapitest"
	"github.com/bindery-dev/bindery/restapi"
)

// createInstances records n instances named prefix-0000… in namespace ns
// in the catalog directly, from 8 writers at once, labelled team=t(i%3).
func createInstances(t testing.TB, store *catalog.Store, ns, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	var g errgroup.Group
	for w := range 8 {
		g.Go(func() error {
			for i := w; i < n; i += 8 {
				in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "not-offered", ClusterServicePlanExternalName: "tiny",
					Parameters: json.RawMessage(`{"size": 1.5, "tags": ["a", "b"], "nested": {"z": 1, "a": null}}`)}}
				in.Name, in.Namespace = fmt.Sprintf("%s-%04d", prefix, i), ns
				in.Labels = map[string]string{"team": fmt.Sprintf("t%d", i%3)}
				in.Annotations = map[string]string{"note": fmt.Sprintf("number %d", i)}
				if _, err := store.CreateInstance(ctx, in); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// lines decodes an NDJSON body, each line on its own.
func lines(t testing.TB, raw []byte) []map[string]any {
	t.Helper()
	out := []map[string]any{}
	for i, line := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if line[len(line)-1] != '\n' {
			t.Fatalf("line %d does not end with a newline: %.200s", i+1, line)
		}
		var obj map[string]any
		if err := json.Unmarshal(line, &obj); err != nil {
			t.Fatalf("line %d: %v: %.200s", i+1, err, line)
		}
		out = append(out, obj)
	}
	return out
}

// allPages reads a list of path page after page (limit 7 to the page,
// then 1000).
func (b *bundle) allPages(token, path string, limit int) []map[string]any {
	b.t.Helper()
	var out []map[string]any
	cont := ""
	for {
		sep := "?"
		if bytes.ContainsRune([]byte(path), '?') {
			sep = "&"
		}
		r := b.must(http.StatusOK, b.do(token, "GET", path+sep+"limit="+strconv.Itoa(limit)+"&continue="+url.QueryEscape(cont), nil))
		out = append(out, r.items()...)
		if cont = r.str("continue"); cont == "" {
			return out
		}
	}
}

// TestExport: an export holds exactly what a list of all its pages holds,
// in the same order, each line the document the list's item is and the
// object's GET (without progress and warnings); a namespace, a label
// selector and a token limited to namespaces narrow it as they narrow the
// list; parameters an export does not take are refused naming them.
func TestExport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.registerBindery("bindery")
	// Over two chunks of the scan (500) in one namespace.
	createInstances(t, b.store, "team-a", "db", 1100)
	createInstances(t, b.store, "team-b", "db", 40)
	for i := range 30 {
		b.must(http.StatusCreated, b.do(b.admin, "POST", "/bindings", map[string]any{"name": fmt.Sprintf("app-%d", i), "namespace": "team-b",
			"labels": map[string]string{"team": fmt.Sprintf("t%d", i%3)}, "spec": map[string]any{"instanceRef": map[string]any{"name": fmt.Sprintf("db-%04d", i)}}}))
	}
	gone := b.must(http.StatusOK, b.do(b.admin, "GET", "/instances/db-0001?namespace=team-b", nil))
	if _, err := b.store.DeleteInstance(ctx, gone.str("id")); err != nil {
		t.Fatal(err)
	}

	export := func(token, path string) ([]map[string]any, response) {
		t.Helper()
		r := b.must(http.StatusOK, b.do(token, "GET", path, nil))
		if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("%s: Content-Type %q", path, ct)
		}
		if rev, err := strconv.ParseInt(r.header.Get("Bindery-Revision"), 10, 64); err != nil || rev <= 0 {
			t.Errorf("%s: Bindery-Revision %q", path, r.header.Get("Bindery-Revision"))
		}
		return lines(t, r.raw), r
	}
	same := func(what string, got, want []map[string]any) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d objects exported, %d listed", what, len(got), len(want))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("%s: object %d exported as\n%v\nlisted as\n%v", what, i, got[i], want[i])
			}
		}
	}

	all, _ := export(b.admin, "/export/instances")
	same("instances", all, b.allPages(b.admin, "/instances", 7))
	if len(all) != 1140 {
		t.Errorf("%d instances exported, want 1140", len(all))
	}
	// Each line is the object's GET, without what only single-object
	// answers carry; the deleted one with its deletionTimestamp.
	for _, i := range []int{0, 499, 500, 1100 + 1, len(all) - 1} {
		one := b.must(http.StatusOK, b.do(b.admin, "GET", "/instances/"+all[i]["id"].(string), nil)).body
		delete(one, "progress")
		delete(one, "warnings")
		if !reflect.DeepEqual(one, all[i]) {
			t.Errorf("instance %d: GET\n%v\nexport\n%v", i, one, all[i])
		}
	}
	if all[1101]["deletionTimestamp"] == nil {
		t.Errorf("the instance being deleted is exported without deletionTimestamp: %v", all[1101])
	}
	bindings, _ := export(b.admin, "/export/bindings")
	same("bindings", bindings, b.allPages(b.admin, "/bindings", 7))
	one := b.must(http.StatusOK, b.do(b.admin, "GET", "/bindings/"+bindings[3]["id"].(string), nil)).body
	delete(one, "progress")
	if !reflect.DeepEqual(one, bindings[3]) {
		t.Errorf("binding: GET\n%v\nexport\n%v", one, bindings[3])
	}
	brokers, _ := export(b.admin, "/export/brokers")
	same("brokers", brokers, b.allPages(b.admin, "/brokers", 7))
	if len(brokers) != 1 {
		t.Errorf("%d brokers exported", len(brokers))
	}

	teamB, _ := export(b.admin, "/export/instances?namespace=team-b")
	same("team-b's instances", teamB, b.allPages(b.admin, "/instances?namespace=team-b", 1000))
	selected, _ := export(b.admin, "/export/instances?labelSelector="+url.QueryEscape("team in (t1,t2),team!=t2"))
	var t1 []map[string]any
	for _, in := range all {
		if in["labels"].(map[string]any)["team"] == "t1" {
			t1 = append(t1, in)
		}
	}
	same("instances labelled team=t1", selected, t1)

	// A token of team-b exports team-b's only, and the cluster's brokers.
	tok, _, err := b.store.IssueToken(ctx, catalog.TokenRequest{Role: catalog.RoleViewer, Namespaces: []string{"team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	limited, _ := export(tok, "/export/instances")
	same("a team-b token's instances", limited, teamB)
	limitedBindings, _ := export(tok, "/export/bindings")
	same("a team-b token's bindings", limitedBindings, bindings)
	limitedBrokers, _ := export(tok, "/export/brokers")
	same("a team-b token's brokers", limitedBrokers, brokers)
	for _, path := range []string{"/export/instances?namespace=team-a", "/export/bindings?namespace=team-a", "/export/brokers?namespace=team-a"} {
		if r := b.do(tok, "GET", path, nil); r.status != http.StatusForbidden || r.str("error") != "forbidden" {
			t.Errorf("%s with a team-b token: %d %s", path, r.status, r.raw)
		}
	}
	if r := b.do("", "GET", "/export/instances", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without a token: %d %s", r.status, r.raw)
	}

	for path, field := range map[string]string{
		"/export/instances?limit=10":                                 "limit",
		"/export/bindings?continue=abc":                              "continue",
		"/export/instances?namespace=a&color=red":                    "color",
		"/export/instances?labelSelector=team%3D%3Dx%3D":             "labelSelector",
		"/export/brokers?labelSelector=" + url.QueryEscape("a in b"): "labelSelector",
	} {
		r := b.do(b.admin, "GET", path, nil)
		if r.status != http.StatusBadRequest || r.str("field") != field || r.str("message") == "" {
			t.Errorf("%s: %d %s, want 400 naming %s", path, r.status, r.raw, field)
		}
	}
}

// smallBuffers is a listener whose connections send through a small
// socket buffer, so that a server writing to a client that does not read
// blocks after a few kilobytes, as it would over a slow network.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// slowAPI serves the REST API over store on a listener of small socket
// buffers, with a client that reads through a small one too; exports is
// how many exports it sends at once (0: the default).
func slowAPI(t *testing.T, store *catalog.Store, exports int) (base string, client *http.Client) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	api := restapi.New(store, log)
	api.SetExports(exports)
	e := serve.NewEcho(log, prometheus.NewRegistry())
	e.HTTPErrorHandler = api.ErrorHandler
	api.Register(e)
	srv := httptest.NewUnstartedServer(e)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(16 << 10)
		}
		return c, err
	}
	// Uncompressed, so that the export fills the small buffers.
	return srv.URL + "/api/v1", &http.Client{Transport: &http.Transport{DialContext: dial, DisableCompression: true}}
}

// openExport asks for an export; its body is closed when the test ends.
func openExport(t *testing.T, client *http.Client, base, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/export/instances", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// startExport begins an export and reads its first line.
func startExport(t *testing.T, client *http.Client, base, token string) (*http.Response, *bufio.Reader) {
	t.Helper()
	res := openExport(t, client, base, token)
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(res.Body)
		t.Fatalf("export: %d %s", res.StatusCode, raw)
	}
	r := bufio.NewReaderSize(res.Body, 512)
	if _, err := r.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	return res, r
}

// snapshotOpen says whether a transaction reading instances is open in
// the test's database: the export's snapshot, still being read.
func snapshotOpen(t *testing.T, b *bundle) bool {
	t.Helper()
	var open bool
	if err := b.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
		AND query LIKE '%FROM catalog.instances%')`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	return open
}

// TestExportSnapshot: writes that commit while an export is being read
// (its snapshot open, objects after them still to send) are not seen by
// it, neither new objects nor a change to one not yet sent; a list read
// afterwards sees them.
func TestExportSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	createInstances(t, b.store, "team", "db", 1200)
	before := b.allPages(b.admin, "/instances", 1000)
	base, client := slowAPI(t, b.store, 1)
	_, rest := startExport(t, client, base, b.admin)
	if !snapshotOpen(t, b) {
		t.Fatal("the export read everything before its first line was read: the writes below would prove nothing")
	}
	// One export at a time on this server: another is refused meanwhile.
	validated := &http.Client{Transport: openapitest.Transport(t, client.Transport)}
	req, _ := http.NewRequest("GET", base+"/export/bindings", nil)
	req.Header.Set("Authorization", "Bearer "+b.admin)
	res, err := validated.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	busy, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !bytes.Contains(busy, []byte(`"too_many_requests"`)) {
		t.Errorf("a second export meanwhile: %d %s", res.StatusCode, busy)
	}
	// A namespace listed after "team", and the last object of "team".
	createInstances(t, b.store, "zz-late", "late", 20)
	last := before[len(before)-1]
	if _, err := b.store.UpdateInstance(ctx, last["id"].(string), 0, func(in *catalog.Instance) error {
		in.Labels["team"] = "changed"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if after := b.allPages(b.admin, "/instances", 1000); len(after) != 1220 {
		t.Fatalf("a list after the writes has %d instances, want 1220", len(after))
	}
	raw, err := io.ReadAll(rest)
	if err != nil {
		t.Fatal(err)
	}
	got := lines(t, raw)
	res, err = validated.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("an export once the other ended: %d", res.StatusCode)
	}
	if len(got) != len(before)-1 {
		t.Fatalf("the export holds %d instances, want %d", len(got)+1, len(before))
	}
	for i, in := range got {
		if !reflect.DeepEqual(in, before[i+1]) {
			t.Fatalf("exported instance %d is\n%v\nbefore the writes it was\n%v", i+1, in, before[i+1])
		}
	}
}

// TestExportCutShort: an export whose snapshot expires once its response
// has begun (a client that stops reading for longer than the snapshot is
// held) is cut short: the client's read fails, rather than ending as a
// complete-looking short export.
func TestExportCutShort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	createInstances(t, b.store, "team", "db", 1200)
	if n := len(b.allPages(b.admin, "/instances", 1000)); n != 1200 {
		t.Fatalf("%d instances listed", n)
	}
	keys, err := keyring.Parse(keyring.Generate())
	if err != nil {
		t.Fatal(err)
	}
	short := catalog.NewStore(b.pool, keys, nil, catalog.WithSnapshotLimit(300*time.Millisecond))
	base, client := slowAPI(t, short, 0)
	_, rest := startExport(t, client, base, b.admin)
	time.Sleep(time.Second)
	raw, err := io.ReadAll(rest)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading on after the snapshot expired: %v after %d bytes, want io.ErrUnexpectedEOF", err, len(raw))
	}
	if n := bytes.Count(raw, []byte("\n")) + 1; n >= 1200 {
		t.Errorf("%d of 1200 instances sent before the cut", n)
	}
	// With the default limit, the export is whole.
	base, client = slowAPI(t, b.store, 0)
	_, rest = startExport(t, client, base, b.admin)
	if raw, err := io.ReadAll(rest); err != nil || bytes.Count(raw, []byte("\n")) != 1199 {
		t.Errorf("an export read at once: %v, %d lines", err, bytes.Count(raw, []byte("\n"))+1)
	}
}

// TestExportsShared: a token reads one export at a time, so one team's
// slow exports cannot hold every export the server sends at once. Team
// a's token holds one open and is refused a second (429); team b's token
// still gets its own, and team a's gets another once its first ends.
func TestExportsShared(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	createInstances(t, b.store, "team-a", "db", 1200)
	createInstances(t, b.store, "team-b", "db", 1)
	tokenOf := func(ns string) string {
		tok, _, err := b.store.IssueToken(ctx, catalog.TokenRequest{Role: catalog.RoleViewer, Namespaces: []string{ns}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	teamA, teamB := tokenOf("team-a"), tokenOf("team-b")
	base, client := slowAPI(t, b.store, 2)
	first, _ := startExport(t, client, base, teamA)
	if !snapshotOpen(t, b) {
		t.Fatal("team a's export read everything before its first line was read: it holds nothing")
	}
	b.must(http.StatusOK, b.do(teamB, "GET", "/instances", nil))
	// status begins an export and says how it was answered; one answered
	// 200 is left open, unread but for its start, as a slow client's.
	status := func(token string) int {
		t.Helper()
		res := openExport(t, client, base, token)
		if res.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, res.Body)
		} else if _, err := bufio.NewReaderSize(res.Body, 512).ReadBytes('\n'); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode
	}
	if got := status(teamA); got != http.StatusTooManyRequests {
		t.Errorf("team a's second export while its first is read: %d, want 429", got)
	}
	if got := status(teamB); got != http.StatusOK {
		t.Errorf("team b's export while team a's is read: %d, want 200", got)
	}
	_, _ = io.Copy(io.Discard, first.Body)
	first.Body.Close()
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		if got := status(teamA); got != http.StatusOK {
			return fmt.Errorf("team a's export after its first ended: %d", got)
		}
		return nil
	})
}
