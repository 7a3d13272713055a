package catalog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
)

// claimAll claims keys with c and returns those it got.
func claimAll(t *testing.T, c *catalog.Claimer, keys []string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, k := range keys {
		release, ok, err := c.Claim(context.Background(), k)
		if err != nil {
			t.Fatalf("claim %s: %v", k, err)
		}
		if ok {
			got[k] = true
			release()
		}
	}
	return got
}

func claimKeys(n int) []string {
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("instance/%d", i))
	}
	return keys
}

// TestClaimer: a process works on the keys of the shards it owns, which
// no other process gets while it holds them; another takes them over
// with Probe once the owner is gone — closed, or its session ended
// under it — and is told which shards it took.
func TestClaimer(t *testing.T) {
	t.Parallel()
	store, pool := newStoreAndPool(t)
	ctx := context.Background()
	a, _ := store.NewClaimer(ctx)
	b, _ := store.NewClaimer(ctx)
	defer b.Close()
	keys := claimKeys(200)
	if got := claimAll(t, a, keys); len(got) != len(keys) {
		t.Fatalf("a free claimer got %d of %d keys", len(got), len(keys))
	}
	// Held, not given back: a claim is a shard's, for as long as its owner runs.
	if got := claimAll(t, a, keys); len(got) != len(keys) {
		t.Fatalf("the owner got %d of %d keys again", len(got), len(keys))
	}
	if got := claimAll(t, b, keys); len(got) != 0 {
		t.Fatalf("another process got %d keys of shards a owns", len(got))
	}
	if taken, err := b.Probe(ctx); err != nil || len(taken) != 0 {
		t.Fatalf("probe while a runs: took %v, %v", taken, err)
	}

	// a's session ends under it (its process died, or the connection
	// broke): b takes over every shard b was refused.
	var ended []int32
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(pid) FILTER (WHERE pg_terminate_backend(pid)), '{}') FROM (SELECT DISTINCT pid FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND classid = 1650749050 AND pid <> pg_backend_pid()
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) l`).Scan(&ended); err != nil || len(ended) == 0 {
		t.Fatalf("ending a's session: %v %v", ended, err)
	}
	// pg_terminate_backend only signals: the session's locks go when it
	// has ended.
	eventually.Succeeds(t, 10*time.Second, func(ctx context.Context) error {
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, ended).Scan(&left); err != nil || left > 0 {
			return fmt.Errorf("%d of a's sessions still running (%v)", left, err)
		}
		return nil
	})
	taken, err := b.Probe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{}
	for _, k := range keys {
		want[catalog.ClaimShard(k)] = true
	}
	if len(taken) != len(want) {
		t.Fatalf("b took shards %v, want the %d of the keys", taken, len(want))
	}
	if got := claimAll(t, b, keys); len(got) != len(keys) {
		t.Fatalf("b got %d of %d keys after taking over", len(got), len(keys))
	}
	// a finds its session lost when it next probes, and no shard is its.
	if _, err := a.Probe(ctx); err == nil {
		t.Error("a's probe did not notice its lost session")
	}
	if got := claimAll(t, a, keys); len(got) != 0 {
		t.Fatalf("a got %d keys b owns now", len(got))
	}

	// b closes: a takes over.
	b.Close()
	taken, err = a.Probe(ctx)
	if err != nil || len(taken) != len(want) {
		t.Fatalf("a took %v after b closed, %v", taken, err)
	}
	a.Close()
}

// TestClaimerBesideEarlierRelease: while an engine of an earlier release
// claims objects one by one, a claimer also takes those per-object claims
// (after its probe has seen such an engine), so the two never work on one
// object together; once it is gone, shards alone do.
func TestClaimerBesideEarlierRelease(t *testing.T) {
	t.Parallel()
	store, pool := newStoreAndPool(t)
	ctx := context.Background()
	old, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Release()
	// The earlier release's claim, as it took it.
	var ok bool
	if err := old.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 7))`, "instance/7").Scan(&ok); err != nil || !ok {
		t.Fatalf("earlier release's claim: %v %v", ok, err)
	}
	c, _ := store.NewClaimer(ctx)
	defer c.Close()
	if _, err := c.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	got := claimAll(t, c, claimKeys(20))
	if got["instance/7"] || len(got) != 19 {
		t.Fatalf("beside an earlier release: got %v, want every key but instance/7", got)
	}
	// The claimer's own per-object claims were given back.
	var held int
	if err := old.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND pid <> pg_backend_pid()
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("%d per-object claims left held (%v)", held, err)
	}
	if _, err := old.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 7))`, "instance/7"); err != nil {
		t.Fatal(err)
	}
	// The key is free now.
	if got := claimAll(t, c, []string{"instance/7"}); !got["instance/7"] {
		t.Fatal("a released per-object claim could not be taken")
	}
	// Per-object claims go on for a while after the last one seen (an
	// earlier release's engine holds its claims only while it works)...
	if _, err := c.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 7))`, "instance/8").Scan(&ok); err != nil || !ok {
		t.Fatalf("earlier release's claim: %v %v", ok, err)
	}
	if got := claimAll(t, c, []string{"instance/8"}); got["instance/8"] {
		t.Fatal("a key an earlier release holds was claimed a probe after it was last seen")
	}
	// ... then shards alone: a lock in the old key space refuses nothing.
	catalog.SetLegacyLinger(c, 0)
	if _, err := old.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 7))`, "instance/8").Scan(&ok); err != nil || !ok {
		t.Fatalf("earlier release's claim: %v %v", ok, err)
	}
	if got := claimAll(t, c, []string{"instance/8"}); !got["instance/8"] {
		t.Fatal("with no earlier release seen for longer than the linger, a key was refused")
	}
	if _, err := old.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}
}
