package catalog_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestRelistsCoalesce: relists asked for while a broker's catalogue is
// being fetched all join one next fetch (the one under way may have read
// the catalogue before whatever prompted them), so registration plus 6
// relists reach the broker twice; each relist gets the broker as stored.
func TestRelistsCoalesce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Delay: 500 * time.Millisecond, Times: 1})
	b := register(t, s, "slow", fake.URL(), "")
	var wg sync.WaitGroup
	var failed atomic.Int32
	relist := func() {
		got, err := s.Relist(ctx, b.ID)
		if err != nil || ready(got).Status != catalog.ConditionTrue {
			failed.Add(1)
			t.Errorf("relist: %v %+v", err, got)
		}
	}
	wg.Go(relist)
	waitFor(t, func() bool { return fake.Count(osbtest.VerbCatalog) == 1 })
	for range 6 {
		wg.Go(relist)
	}
	wg.Wait()
	if n := fake.Count(osbtest.VerbCatalog); n != 2 {
		t.Errorf("registration and 6 relists during its fetch reached the broker %d times, want 2", n)
	}
	// Once nothing is under way, a relist fetches at once.
	if _, err := s.Relist(ctx, b.ID); err != nil || fake.Count(osbtest.VerbCatalog) != 3 {
		t.Errorf("a relist after the others: %v, %d fetches", err, fake.Count(osbtest.VerbCatalog))
	}
}

// TestRequestRelistReturnsAtOnce: the engine's request for a fetch (after
// a MaintenanceInfoConflict) returns at once while a fetch is under way,
// joins the next fetch, and that fetch happens.
func TestRequestRelistReturnsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "busy", fake.URL(), "")
	fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Delay: 2 * time.Second, Times: 1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.Relist(ctx, b.ID)
	}()
	waitFor(t, func() bool { return fake.Count(osbtest.VerbCatalog) == 1 })
	start := time.Now()
	for range 3 {
		s.RequestRelist(b.ID)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("RequestRelist took %s while a fetch of 2 s was under way", d)
	}
	<-done
	eventually.Succeeds(t, 10*time.Second, func(ctx context.Context) error {
		if n := fake.Count(osbtest.VerbCatalog); n != 2 {
			return fmt.Errorf("%d fetches, want the one under way and one more", n)
		}
		return nil
	})
	// Nothing under way: the request starts a fetch itself.
	s.RequestRelist(b.ID)
	waitFor(t, func() bool { return fake.Count(osbtest.VerbCatalog) == 3 })
}

// TestCatalogueFetchesLimited: with a limit of one fetch at a time, two
// brokers' fetches take turns.
func TestCatalogueFetchesLimited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, catalog.WithCatalogueFetches(1))
	var inFlight, most atomic.Int32
	broker := func(name string) string {
		doc := `{"services":[{"id":"` + uuid.NewString() + `","name":"` + name + `","description":"d","bindable":true,
			"plans":[{"id":"` + uuid.NewString() + `","name":"p","description":"d"}]}]}`
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(300 * time.Millisecond)
			_, _ = w.Write([]byte(doc))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	a, b := register(t, s, "a", broker("a"), ""), register(t, s, "b", broker("b"), "")
	var wg sync.WaitGroup
	for _, id := range []string{a.ID, b.ID} {
		wg.Go(func() {
			if _, err := s.Relist(ctx, id); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d fetches at once with a limit of 1", m)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRelistGivenUpWhileQueued: a relist that gives up while it waits for
// the next fetch cancels that fetch (no one wants it); one asked for
// afterwards still gets a fetch.
func TestRelistGivenUpWhileQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Delay: 2 * time.Second, Times: 1})
	b := register(t, s, "queued", fake.URL(), "")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.Relist(ctx, b.ID)
	}()
	waitFor(t, func() bool { return fake.Count(osbtest.VerbCatalog) == 1 })
	gaveUp, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Relist(gaveUp, b.ID); err == nil {
		t.Fatal("a relist that gave up succeeded")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a relist that gave up while queued returned after %s, not at once", d)
	}
	later := make(chan error, 1)
	go func() {
		_, err := s.Relist(ctx, b.ID)
		later <- err
	}()
	<-done
	if err := <-later; err != nil {
		t.Fatalf("a relist asked for after another gave up: %v", err)
	}
	if n := fake.Count(osbtest.VerbCatalog); n != 2 {
		t.Errorf("%d fetches, want the first and one for the later relist", n)
	}
}

// TestCatalogueFetchesTakeTurns: the fetch slots are shared by the
// brokers' namespaces in turns, not in the order the fetches were asked
// for. Namespace team-a asks for 6 slow fetches (the Kubernetes API's
// relistRequests does so without waiting), and team-b's relist, asked
// for after them, is fetched after the one under way and at most one more
// of team-a's (whose turn it was), rather than after all of them.
func TestCatalogueFetchesTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, catalog.WithCatalogueFetches(1))
	var mu sync.Mutex
	var started []string
	var slow atomic.Bool
	broker := func(name string) string {
		return fetchedBroker(t, &mu, &started, name, func() time.Duration {
			if slow.Load() {
				return 400 * time.Millisecond
			}
			return 0
		})
	}
	var flood []*catalog.Broker
	for i := range 6 {
		flood = append(flood, registerIn(t, s, "team-a", fmt.Sprintf("a-%d", i), broker(fmt.Sprintf("a-%d", i))))
	}
	other := registerIn(t, s, "team-b", "b", broker("b"))
	mu.Lock()
	started = nil
	mu.Unlock()
	slow.Store(true)
	for _, b := range flood {
		s.RequestRelist(b.ID)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(started) == 1 })
	time.Sleep(150 * time.Millisecond) // team-a's other fetches wait for the slot
	begin := time.Now()
	if _, err := s.Relist(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	mu.Lock()
	order := slices.Clone(started)
	mu.Unlock()
	if i := slices.Index(order, "b"); i < 1 || i > 2 {
		t.Errorf("team-b's fetch started after %d of team-a's (%v, %s), want after the one under way and at most one more", i, order, took)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(started) == 7 })
}

// TestScheduledRelistsTakeTurns: the relister takes the due brokers of
// the namespaces in turns. Namespace team-a's 5 slow brokers fell due
// before team-b's one, which is relisted second, not after all of them.
func TestScheduledRelistsTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	var mu sync.Mutex
	var started []string
	broker := func(ns, name string) {
		url := fetchedBroker(t, &mu, &started, name, func() time.Duration { return 200 * time.Millisecond })
		b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: url, RelistDuration: "1h"}}
		b.Name, b.Namespace = name, ns
		// Not relisted here: due at once, in the order registered.
		if _, err := s.CreateBroker(ctx, b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		broker("team-a", fmt.Sprintf("a-%d", i))
	}
	broker("team-b", "b")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.RunRelister(rctx, 20*time.Millisecond)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(started) == 6 })
	mu.Lock()
	defer mu.Unlock()
	if i := slices.Index(started, "b"); i != 1 {
		t.Errorf("team-b's broker was relisted after %d of team-a's (%v), want after one", i, started)
	}
}

// fetchedBroker serves a catalogue of one service named name, each fetch
// of it noted in started (under mu) and answered after delay(); it
// returns the broker's URL.
func fetchedBroker(t *testing.T, mu *sync.Mutex, started *[]string, name string, delay func() time.Duration) string {
	doc := `{"services":[{"id":"` + uuid.NewString() + `","name":"` + name + `","description":"d","bindable":true,
		"plans":[{"id":"` + uuid.NewString() + `","name":"p","description":"d"}]}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*started = append(*started, name)
		mu.Unlock()
		time.Sleep(delay())
		_, _ = w.Write([]byte(doc))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
