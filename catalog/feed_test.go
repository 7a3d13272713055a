package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/syncbuf"
	"github.com/bindery-dev/bindery/migrations"
)

// newStoreAndPool is newStore with the pool under it, for tests that play
// another process on the same database.
func newStoreAndPool(t *testing.T) (*catalog.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	if err := migrations.Up(context.Background(), pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	return catalog.NewStore(pool, keys, nil), pool
}

// follow starts Follow after revision after and returns the changes it
// hands on, and a stop that returns once Follow has.
func follow(t *testing.T, s *catalog.Store, after int64, opts catalog.FollowOptions, fail func(page []catalog.Change) error) (<-chan catalog.Change, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan catalog.Change, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Feed().Follow(ctx, after, opts, func(_ context.Context, page []catalog.Change) error {
			if fail != nil {
				if err := fail(page); err != nil {
					return err
				}
			}
			for _, c := range page {
				out <- c
			}
			return nil
		})
	}()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Follow did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return out, stop
}

func next(t *testing.T, ch <-chan catalog.Change) catalog.Change {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("no change from the feed")
		return catalog.Change{}
	}
}

// TestFollowCatchesUpThenFollows: Follow hands on what the feed already
// holds, page by page, then what is written later (woken by NOTIFY: the
// idle period is longer than the test).
func TestFollowCatchesUpThenFollows(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	start, err := s.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		register(t, s, fmt.Sprintf("before-%d", i), "http://127.0.0.1:1", "")
	}
	ch, _ := follow(t, s, start, catalog.FollowOptions{Page: 2, Idle: time.Hour}, nil)
	last := start
	for i := range 5 {
		c := next(t, ch)
		if c.Kind != catalog.KindBroker || c.Type != catalog.Added || c.Object.Name != fmt.Sprintf("before-%d", i) || c.Revision <= last {
			t.Fatalf("change %d: %s %s %s at %d (after %d)", i, c.Type, c.Kind, c.Object.Name, c.Revision, last)
		}
		last = c.Revision
	}
	register(t, s, "after", "http://127.0.0.1:1", "")
	if c := next(t, ch); c.Object.Name != "after" || !c.Current {
		t.Fatalf("change after catching up: %s %s (current %v)", c.Type, c.Object.Name, c.Current)
	}
}

// TestFollowReconnects: the listening connection is killed; Follow
// connects again and reads what was written meanwhile. A page its reader
// failed on is handed on again.
func TestFollowReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	var failures atomic.Int32
	ch, _ := follow(t, s, 0, catalog.FollowOptions{Idle: time.Hour}, func([]catalog.Change) error {
		if failures.Add(1) == 1 {
			return errors.New("the reader fails once")
		}
		return nil
	})
	register(t, s, "first", "http://127.0.0.1:1", "")
	if c := next(t, ch); c.Object.Name != "first" {
		t.Fatalf("first change: %s", c.Object.Name)
	}
	if n := failures.Load(); n < 2 {
		t.Fatalf("the failed page was not read again: %d reads", n)
	}
	// Kill the listener's connection and write while it is down.
	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("listening connections killed: %d", killed)
	}
	register(t, s, "second", "http://127.0.0.1:1", "")
	if c := next(t, ch); c.Object.Name != "second" {
		t.Fatalf("change after the reconnection: %s", c.Object.Name)
	}
}

// TestFollowIdle: OnIdle runs every Idle even while notifications keep
// coming, and Follow hands on InstanceID for a binding's change.
func TestFollowIdle(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	idle := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Feed().Follow(ctx, 0, catalog.FollowOptions{Idle: 300 * time.Millisecond, OnIdle: func(context.Context) error {
			idle <- struct{}{}
			return nil
		}}, func(context.Context, []catalog.Change) error { return nil })
	}()
	// Writes every 50 ms wake Follow more often than Idle.
	deadline := time.After(20 * time.Second)
	for i := 0; ; i++ {
		register(t, s, fmt.Sprintf("b-%d", i), "http://127.0.0.1:1", "")
		select {
		case <-idle:
			cancel()
			<-done
			return
		case <-deadline:
			t.Fatal("OnIdle never ran while notifications came")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestPruneClaimed: one process prunes the feed at a time; the others
// skip their round while it holds the claim.
func TestPruneClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	for i := range 4 {
		register(t, s, fmt.Sprintf("b-%d", i), "http://127.0.0.1:1", "")
	}
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keep := catalog.Retention{MinAge: 0, MinCount: 1}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // test
	var held bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('catalog.changes: prune', 7))`).Scan(&held); err != nil || !held {
		t.Fatalf("hold the pruning claim: %v %v", held, err)
	}
	if before, n, err := s.Feed().PruneKeeping(ctx, keep); err != nil || n != 0 || before != 0 {
		t.Fatalf("pruned while another held the claim: before %d, %d removed, %v", before, n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	before, n, err := s.Feed().PruneKeeping(ctx, keep)
	if err != nil || n != 3 || before != rev {
		t.Fatalf("prune: before %d (want %d), %d removed (want 3), %v", before, rev, n, err)
	}
	if k, err := s.Feed().KeptAfter(ctx); err != nil || k != rev-1 {
		t.Fatalf("kept after %d, want %d (%v)", k, rev-1, err)
	}
}

// TestRunPrunerReturns: RunPruner prunes on its own and returns once its
// context ends.
func TestRunPrunerReturns(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 3 {
		register(t, s, fmt.Sprintf("b-%d", i), "http://127.0.0.1:1", "")
	}
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// MinAge below the least: RunPruner takes r as given, the
		// components check their own options.
		s.Feed().RunPruner(ctx, catalog.Retention{MinAge: time.Nanosecond, MinCount: 1, Every: 20 * time.Millisecond})
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		k, err := s.Feed().KeptAfter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k == rev-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept after %d, want %d", k, rev-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunPruner did not return after its context ended")
	}
}

// TestLastOf: the position of the newest change of some kinds moves on
// with their changes only, and never comes back to an earlier position,
// pruned or not.
func TestLastOf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStoreAndPool(t)
	register(t, s, "b-0", "http://127.0.0.1:1", "")
	brokers0, err := s.Feed().LastOf(ctx, catalog.KindBroker)
	if err != nil {
		t.Fatal(err)
	}
	plans0, err := s.Feed().LastOf(ctx, catalog.KindServiceClass, catalog.KindServicePlan)
	if err != nil {
		t.Fatal(err)
	}
	register(t, s, "b-1", "http://127.0.0.1:1", "")
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Feed().LastOf(ctx, catalog.KindBroker); got != rev || got <= brokers0 {
		t.Fatalf("after a broker change: %d, want %d", got, rev)
	}
	if got, _ := s.Feed().LastOf(ctx, catalog.KindServiceClass, catalog.KindServicePlan); got != plans0 {
		t.Fatalf("classes and plans moved with a broker: %d, was %d", got, plans0)
	}
	if _, err := s.Feed().PruneBefore(ctx, rev+1); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Feed().LastOf(ctx, catalog.KindBroker); got < rev {
		t.Fatalf("after pruning everything: %d, back before %d", got, rev)
	}
}

// TestFollowAfterLostWrites: a database that lost writes a follower had
// read (a failover to a standby that lacked them) grants their revisions
// again; the follower reads on from the feed's newest revision, hands on
// the changes that come after, and says what happened.
func TestFollowAfterLostWrites(t *testing.T) {
	t.Parallel()
	logs := &syncbuf.Buffer{}
	pool := pgtest.Pool(t)
	if err := migrations.Up(context.Background(), pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	s := catalog.NewStore(pool, keys, slog.New(slog.NewTextHandler(logs, nil)))
	rev, err := s.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// As if the follower had read ten revisions the database no longer has.
	ch, _ := follow(t, s, rev+10, catalog.FollowOptions{Idle: time.Hour}, nil)
	eventually.Succeeds(t, 20*time.Second, func(context.Context) error {
		if !strings.Contains(logs.String(), "the change feed went back") {
			return fmt.Errorf("nothing said of the lost writes:\n%s", logs.String())
		}
		return nil
	})
	register(t, s, "after-the-loss", "http://127.0.0.1:1", "")
	if c := next(t, ch); c.Object.Name != "after-the-loss" || c.Revision != rev+1 {
		t.Fatalf("change after the loss: %s at %d, want after-the-loss at %d", c.Object.Name, c.Revision, rev+1)
	}
}

// TestPruneBoundedInBytes: the feed keeps at most Retention.MaxBytes of
// documents, pruning changes younger than MinAge and among the newest
// MinCount when they hold more, whole revisions at a time and never the
// newest one; a reader resuming from before what is kept (a watch's
// resourceVersion) then finds it gone (410 Gone) sooner than MinAge.
func TestPruneBoundedInBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	long := strings.Repeat("z", 4<<10) // a message is cut to 1 KiB, a broker's URL (up to 2 KiB) is not
	var revs []int64
	for i := range 40 {
		register(t, s, fmt.Sprintf("b-%d", i), "http://127.0.0.1:1/"+long[:1900]+fmt.Sprint(i), "")
		rev, err := s.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	var total, rows int64
	if err := pool.QueryRow(ctx, `SELECT sum(pg_column_size(object)), count(*) FROM catalog.changes`).Scan(&total, &rows); err != nil {
		t.Fatal(err)
	}
	limit := total / 4
	keep := catalog.Retention{MinAge: time.Hour, MinCount: 1_000_000, MaxBytes: limit}
	before, n, err := s.Feed().PruneKeeping(ctx, keep)
	if err != nil || n == 0 {
		t.Fatalf("prune: %d removed before %d, %v", n, before, err)
	}
	var kept int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(pg_column_size(object)), 0) FROM catalog.changes`).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept > limit || kept < limit/2 {
		t.Errorf("%d bytes kept of %d, want at most %d and not much less", kept, total, limit)
	}
	after, err := s.Feed().KeptAfter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after <= revs[0] || after >= revs[len(revs)-1] {
		t.Errorf("kept after %d; revisions were %d to %d", after, revs[0], revs[len(revs)-1])
	}
	// A reader from before that finds its changes gone; one from there
	// reads every change since, whole revisions.
	changes, err := s.Feed().Since(ctx, after, nil, 0)
	if err != nil || len(changes) == 0 || changes[0].Revision != after+1 {
		t.Errorf("since %d: %d changes from %v (%v)", after, len(changes), changes[0].Revision, err)
	}

	// The newest revision stays, whatever its size.
	if _, _, err := s.Feed().PruneKeeping(ctx, catalog.Retention{MinAge: time.Hour, MinCount: 1_000_000, MaxBytes: 1}); err != nil {
		t.Fatal(err)
	}
	var oldest int64
	if err := pool.QueryRow(ctx, `SELECT min(revision) FROM catalog.changes`).Scan(&oldest); err != nil || oldest != revs[len(revs)-1] {
		t.Errorf("with 1 byte: the oldest revision kept is %d, want the newest %d (%v)", oldest, revs[len(revs)-1], err)
	}
}

// TestEveryChangeHasARevision: a write of many objects (a relist writes
// the broker and every class and plan at once) gives each change a
// revision of its own, stamped on its object, so that a reader that
// stops after any change and resumes from its revision (a watch resumed
// from the last resourceVersion it was sent) reads the rest, and only the
// rest.
func TestEveryChangeHasARevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	start, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	all, err := s.Feed().Since(ctx, start, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 5 {
		t.Fatalf("%d changes for a broker and its catalogue", len(all))
	}
	newest := map[string]int64{}
	for i, c := range all {
		if i > 0 && c.Revision <= all[i-1].Revision {
			t.Fatalf("change %d (%s %s) at %d after %d: changes share a revision", i, c.Kind, c.Object.Name, c.Revision, all[i-1].Revision)
		}
		if c.Type != catalog.Deleted && c.Object.ResourceVersion != c.Revision {
			t.Errorf("change %d of %s %s at %d carries resourceVersion %d", i, c.Kind, c.Object.Name, c.Revision, c.Object.ResourceVersion)
		}
		newest[c.Object.ID] = c.Revision
	}
	for i, c := range all[:len(all)-1] {
		rest, err := s.Feed().Since(ctx, c.Revision, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rest) != len(all)-i-1 || rest[0].Object.ID != all[i+1].Object.ID {
			t.Fatalf("resumed after change %d of %d: %d changes", i, len(all), len(rest))
		}
	}
	plans, err := s.ListPlans(ctx, catalog.PlanFilter{}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans.Items {
		if p.ResourceVersion != newest[p.ID] {
			t.Errorf("plan %s has resourceVersion %d, its last change %d", p.Spec.ExternalName, p.ResourceVersion, newest[p.ID])
		}
	}
	got, err := s.GetBroker(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != newest[b.ID] {
		t.Errorf("broker has resourceVersion %d, its last change %d", got.ResourceVersion, newest[b.ID])
	}
}
