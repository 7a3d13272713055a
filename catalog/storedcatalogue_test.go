package catalog_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// planPositions are the positions of a broker's plan rows, by external id.
func planPositions(t *testing.T, pool *pgxpool.Pool, broker string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT external_id, position FROM catalog.service_plans WHERE broker_id = $1`, broker)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var pos int
		if err := rows.Scan(&id, &pos); err != nil {
			t.Fatal(err)
		}
		out[id] = pos
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// listedWithPool is listedFake with the store's pool.
func listedWithPool(t *testing.T) (*catalog.Store, *pgxpool.Pool, *osbtest.Broker, *catalog.Broker) {
	t.Helper()
	s, pool := newPoolStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "fake", fake.URL(), "")
	return s, pool, fake, relistReady(t, s, b, 4)
}

// misplacePlans sets the position of a broker's plans to -1 behind the
// store's back: a relist that writes the rows puts them back.
func misplacePlans(t *testing.T, pool *pgxpool.Pool, broker string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE catalog.service_plans SET position = -1 WHERE broker_id = $1`, broker); err != nil {
		t.Fatal(err)
	}
}

// relistReady relists b and checks that it is Ready with want plans and a
// new resourceVersion.
func relistReady(t *testing.T, s *catalog.Store, b *catalog.Broker, want int) *catalog.Broker {
	t.Helper()
	got, err := s.Relist(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := ready(got); c.Status != catalog.ConditionTrue || got.Status.ServicePlanCount != want || got.ResourceVersion <= b.ResourceVersion {
		t.Fatalf("after the relist: Ready %s (%s), %d plans (want %d), resourceVersion %d after %d",
			c.Status, c.Message, got.Status.ServicePlanCount, want, got.ResourceVersion, b.ResourceVersion)
	}
	return got
}

// TestUnchangedCatalogueLeftAlone: a relist that fetches the document
// stored last neither reads nor writes the broker's classes and plans (a
// position changed behind its back stays), yet records the fetch; a
// changed document is written whole.
func TestUnchangedCatalogueLeftAlone(t *testing.T) {
	t.Parallel()
	s, pool, fake, b := listedWithPool(t)
	misplacePlans(t, pool, b.ID)
	b = relistReady(t, s, b, 4)
	for id, pos := range planPositions(t, pool, b.ID) {
		if pos != -1 {
			t.Errorf("plan %s: position %d written by a relist of the same catalogue", id, pos)
		}
	}
	full := fake.Catalog()
	trimmed := []osbtest.Service{full[0]}
	trimmed[0].Plans = full[0].Plans[:3]
	fake.SetCatalog(trimmed)
	relistReady(t, s, b, 3)
	for id, pos := range planPositions(t, pool, b.ID) {
		if pos < 0 {
			t.Errorf("plan %s: position %d left by a relist of a changed catalogue", id, pos)
		}
	}
}

// TestStoredCatalogueFollowsGeneration: the same document is stored again
// once the broker's spec changed (here its catalog restrictions), and a
// removed plan that lost what held it is deleted by a relist of the same
// document, as by any other.
func TestStoredCatalogueFollowsGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedFake(t)
	plans := fake.Catalog()[0].Plans
	b, err := s.UpdateBroker(ctx, b.ID, 0, func(b *catalog.Broker) (*catalog.BrokerAuth, error) {
		b.Spec.CatalogRestrictions = &catalog.CatalogRestrictions{ServicePlan: []string{"spec.externalName!=" + plans[3].Name}}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b = relistReady(t, s, b, 3)
	held, err := s.SetPlanVisibility(ctx, plans[2].ID, []string{"team-a"})
	if err != nil {
		t.Fatal(err)
	}
	two := fake.Catalog()[:1]
	two[0].Plans = plans[:2]
	fake.SetCatalog(two)
	b = relistReady(t, s, b, 2)
	if _, err := s.GetPlan(ctx, held.ID); err != nil {
		t.Fatalf("the removed plan whose visibility was set: %v", err)
	}
	if _, err := s.SetPlanVisibility(ctx, held.ID, nil); err != nil {
		t.Fatal(err)
	}
	relistReady(t, s, b, 2)
	if _, err := s.GetPlan(ctx, held.ID); err == nil {
		t.Error("a removed plan that nothing holds any longer is kept by a relist of the same catalogue")
	}
}

// listedWithETag is listedFake with a broker that sends an ETag.
func listedWithETag(t *testing.T) (*catalog.Store, *osbtest.Broker, *catalog.Broker) {
	t.Helper()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalogETag())
	b := register(t, s, "fake", fake.URL(), "")
	return s, fake, relistReady(t, s, b, 4)
}

// TestCatalogueNotModified: a broker that sends an ETag is asked with it
// (If-None-Match) and may answer 304 Not Modified, which records the fetch
// without reading a document; a changed spec asks without it.
func TestCatalogueNotModified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedWithETag(t)
	b = relistReady(t, s, b, 4)
	if n := fake.NotModified(); n != 1 {
		t.Fatalf("the broker answered 304 to %d fetches, want 1 (the second)", n)
	}
	full := fake.Catalog()
	trimmed := []osbtest.Service{full[0]}
	trimmed[0].Plans = full[0].Plans[:3]
	fake.SetCatalog(trimmed)
	b = relistReady(t, s, b, 3)
	b, err := s.UpdateBroker(ctx, b.ID, 0, func(b *catalog.Broker) (*catalog.BrokerAuth, error) {
		b.Spec.RelistDuration = "1h0m0s"
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	relistReady(t, s, b, 3)
	if n := fake.NotModified(); n != 1 {
		t.Errorf("304s after the catalogue and the spec changed: %d, want still 1", n)
	}
	var asked []string
	for _, r := range fake.Requests() {
		if r.Verb == osbtest.VerbCatalog {
			asked = append(asked, r.Header.Get("If-None-Match"))
		}
	}
	if len(asked) < 4 || asked[0] != "" || asked[1] == "" || asked[len(asked)-1] != "" {
		t.Errorf("If-None-Match of the fetches: %q; want none at the first and after the spec changed, the ETag at the second", asked)
	}
}

// waitForFetches waits until the broker was asked for its catalogue n
// times.
func waitForFetches(t *testing.T, fake *osbtest.Broker, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); fake.Count(osbtest.VerbCatalog) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the broker was asked for its catalogue %d times, not %d", fake.Count(osbtest.VerbCatalog), n)
		}
	}
}

// changedDuringFetch relists b with its broker's next catalogue answer
// held, changes b's spec (change's answer is UpdateBroker's credentials)
// while the fetch waits for it, then lets the answer go: the broker as
// changed, and the relist's error.
func changedDuringFetch(t *testing.T, s *catalog.Store, fake *osbtest.Broker, b *catalog.Broker, change func(*catalog.Broker) *catalog.BrokerAuth) (*catalog.Broker, error) {
	t.Helper()
	ctx := context.Background()
	answer := make(chan struct{})
	fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Until: answer, Times: 1})
	fetched := fake.Count(osbtest.VerbCatalog)
	relisted := make(chan error, 1)
	go func() {
		_, err := s.Relist(ctx, b.ID)
		relisted <- err
	}()
	waitForFetches(t, fake, fetched+1)
	b, err := s.UpdateBroker(ctx, b.ID, 0, func(b *catalog.Broker) (*catalog.BrokerAuth, error) { return change(b), nil })
	if err != nil {
		t.Fatal(err)
	}
	close(answer)
	return b, <-relisted
}

// TestCatalogueNotModifiedToStaleValidators: a 304 to validators that the
// broker's spec change made stale while the broker answered is not taken
// for the new generation: the catalogue is fetched again, whole, and
// stored under the new spec.
func TestCatalogueNotModifiedToStaleValidators(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedWithETag(t)
	plans := fake.Catalog()[0].Plans
	b, err := changedDuringFetch(t, s, fake, b, func(b *catalog.Broker) *catalog.BrokerAuth {
		b.Spec.CatalogRestrictions = &catalog.CatalogRestrictions{ServicePlan: []string{"spec.externalName!=" + plans[3].Name}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetBroker(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ServicePlanCount != 3 || fake.NotModified() != 1 || fake.Count(osbtest.VerbCatalog) != 3 {
		t.Errorf("after a 304 that the spec change made stale: %d plans (want 3), %d 304s (want 1), %d fetches (want 3)",
			got.Status.ServicePlanCount, fake.NotModified(), fake.Count(osbtest.VerbCatalog))
	}
}

// TestCatalogueStoredByAnotherRelease: a release before the stored
// catalogue was kept (a replica during a rolling upgrade) stores a
// catalogue without saying what it stored from; the next relist of the
// document stored before stores it again rather than trusting the rows.
func TestCatalogueStoredByAnotherRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _, b := listedWithPool(t)
	// What such a store writes: other rows, a new retrieval time.
	misplacePlans(t, pool, b.ID)
	if _, err := pool.Exec(ctx, `UPDATE catalog.brokers SET status = jsonb_set(status, '{lastCatalogRetrievalTime}', to_jsonb(clock_timestamp()))
		WHERE id = $1`, b.ID); err != nil {
		t.Fatal(err)
	}
	b = relistReady(t, s, b, 4)
	for id, pos := range planPositions(t, pool, b.ID) {
		if pos < 0 {
			t.Errorf("plan %s: position %d kept after another release stored the catalogue", id, pos)
		}
	}
	misplacePlans(t, pool, b.ID)
	relistReady(t, s, b, 4)
	for id, pos := range planPositions(t, pool, b.ID) {
		if pos != -1 {
			t.Errorf("plan %s: position %d written: the store after the other release's did not record what it stored from", id, pos)
		}
	}
}

// TestRelistCounts: each fetch is counted by how it ended, in the
// broker's row: stored, the same document left as it was, a 304, a
// failure.
func TestRelistCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedWithETag(t) // stored
	plain := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	own := &catalog.Broker{Spec: catalog.BrokerSpec{URL: plain.URL()}}
	own.Name, own.Namespace = "own", "team-a"
	own, err := s.CreateBroker(ctx, own, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	own = relistReady(t, s, own, 4)
	relistReady(t, s, own, 4) // the same document
	fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Status: http.StatusInternalServerError, Times: 1})
	if _, err := s.Relist(ctx, b.ID); err == nil {
		t.Fatal("a relist the broker answered 500 succeeded")
	}
	relistReady(t, s, b, 4) // 304: a failure leaves the validators of the catalogue stored last
	counts, err := s.RelistCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.RelistCount{
		{Broker: "fake", Stored: 1, NotModified: 1, Failed: 1},
		{Namespace: "team-a", Broker: "own", Stored: 1, Unchanged: 1},
	}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("counts %+v, want %+v", counts, want)
	}
}

// TestCatalogueFetchedForAnotherSpec: a catalogue fetched for the broker's
// spec as it was (from its URL then) is not stored for the spec that
// replaced it during the fetch: the new URL's is fetched and stored.
func TestCatalogueFetchedForAnotherSpec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, before, b := listedFake(t)
	plans := before.Catalog()[0].Plans
	two := before.Catalog()[:1]
	two[0].Plans = plans[:2]
	before.SetCatalog(two) // a changed document, which a relist stores
	after := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b, err := changedDuringFetch(t, s, before, b, func(b *catalog.Broker) *catalog.BrokerAuth {
		b.Spec.URL = after.URL()
		return catalog.KeepAuth
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetBroker(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ServicePlanCount != len(plans) || after.Count(osbtest.VerbCatalog) != 1 || got.Status.ReconciledGeneration != b.Generation {
		t.Errorf("after the URL changed during a fetch: %d plans (want the new URL's %d), the new URL asked %d times (want 1), reconciled generation %d of %d",
			got.Status.ServicePlanCount, len(plans), after.Count(osbtest.VerbCatalog), got.Status.ReconciledGeneration, b.Generation)
	}
}

// TestCatalogueRowsOfAnotherFormat: rows that a release making them
// otherwise stored (catalogue_format) are written again by a relist of the
// same document.
func TestCatalogueRowsOfAnotherFormat(t *testing.T) {
	t.Parallel()
	s, pool, _, b := listedWithPool(t)
	misplacePlans(t, pool, b.ID)
	if _, err := pool.Exec(context.Background(), `UPDATE catalog.brokers SET catalogue_format = 0 WHERE id = $1`, b.ID); err != nil {
		t.Fatal(err)
	}
	relistReady(t, s, b, 4)
	for id, pos := range planPositions(t, pool, b.ID) {
		if pos < 0 {
			t.Errorf("plan %s: position %d kept from rows of another format", id, pos)
		}
	}
}

// TestSpecChangingUnderEveryFetch: a broker whose spec changes during each
// of its fetches is fetched again a bounded number of times, then the
// relist says why it stored nothing; the next one stores the catalogue.
func TestSpecChangingUnderEveryFetch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedFake(t)
	holds := make([]chan struct{}, 3)
	for i := range holds {
		holds[i] = make(chan struct{})
		fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Until: holds[i], Times: 1})
	}
	relisted := make(chan error, 1)
	go func() {
		_, err := s.Relist(ctx, b.ID)
		relisted <- err
	}()
	for i, hold := range holds {
		waitForFetches(t, fake, 2+i)
		var err error
		if b, err = s.UpdateBroker(ctx, b.ID, 0, func(b *catalog.Broker) (*catalog.BrokerAuth, error) {
			b.Spec.RelistDuration = fmt.Sprintf("%dh0m0s", i+1)
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		close(hold)
	}
	if err := <-relisted; err == nil || !strings.Contains(err.Error(), "changed during each of 3 fetches") {
		t.Fatalf("a relist whose spec changed under each fetch: %v", err)
	}
	got, err := s.GetBroker(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := ready(got); c.Status != catalog.ConditionFalse || c.Reason != catalog.ReasonErrorFetchingCatalog || fake.Count(osbtest.VerbCatalog) != 4 {
		t.Errorf("after it: Ready %s %s (%s), %d fetches (want 4)", c.Status, c.Reason, c.Message, fake.Count(osbtest.VerbCatalog))
	}
	relistReady(t, s, got, 4)
}
