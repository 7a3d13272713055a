package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// follower is a reader of the feed as a watch is: from a revision, every
// change after it, and the state they make, from a snapshot when it
// started with one.
type follower struct {
	name    string
	from    int64
	mu      sync.Mutex
	changes []catalog.Change
	state   map[string]*catalog.RawObject
}

func (f *follower) take(_ context.Context, page []catalog.Change) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range page {
		f.changes = append(f.changes, c)
		if f.state == nil {
			continue
		}
		if c.Type == catalog.Deleted {
			delete(f.state, c.Object.ID)
		} else {
			f.state[c.Object.ID] = c.Object
		}
	}
	return nil
}

// TestWatchNeverMisses hammers the catalog with 12 writers that create,
// change, delete and create again a few dozen instances of a few names,
// each commit on its own, while readers follow the change feed: from the
// start, from the final revision read while the writers run, and from a
// snapshot's revision (the list a watch-list starts with). Each reader
// must see every change after its start exactly once, in revision order
// (and, object by object, in the order the writes were made), and the
// snapshot's reader must end with the objects as the catalog holds them.
func TestWatchNeverMisses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t)
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	start, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	followers := []*follower{{name: "from the start", from: start}}
	stops := []func(){follow2(t, s, followers[0])}
	done := make(chan struct{})
	var writes sync.WaitGroup
	var mu sync.Mutex
	written := map[[2]string]bool{} // revision and id of every write that succeeded
	for w := range 12 {
		writes.Go(func() { hammer(ctx, t, s, w, done, &mu, written) })
	}
	time.Sleep(time.Second)
	// Joining while the writers run.
	mid, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{name: "from the final revision", from: mid}
	followers, stops = append(followers, f), append(stops, follow2(t, s, f))
	snap := &follower{name: "from a snapshot", state: map[string]*catalog.RawObject{}}
	if err := s.ScanRaw(ctx, catalog.KindInstance, catalog.ListOptions{}, func(rev int64, _ string, items []*catalog.RawObject) error {
		snap.from = rev
		for _, o := range items {
			snap.state[o.ID] = o
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	followers, stops = append(followers, snap), append(stops, follow2(t, s, snap))
	time.Sleep(3 * time.Second)
	close(done)
	writes.Wait()
	end, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.Feed().Since(ctx, start, []string{catalog.KindInstance}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range followers {
		waitFollowed(t, f, all)
	}
	for _, stop := range stops {
		stop()
	}
	mu.Lock()
	checkWritten(t, all, written, len(written))
	mu.Unlock()
	for _, f := range followers {
		checkFollower(t, f, all, end)
	}
	checkState(t, s, snap)
}

// follow2 follows the feed for f until the returned stop.
func follow2(t *testing.T, s *catalog.Store, f *follower) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Feed().Follow(ctx, f.from, catalog.FollowOptions{Kinds: []string{catalog.KindInstance}, Page: 100, Idle: 200 * time.Millisecond}, f.take)
	}()
	return func() {
		cancel()
		<-done
	}
}

// hammer writes until done: a create of one of 8 names (of this writer or
// the next, so that two writers race for a name), a change of an
// instance's labels (another writer's too), or a delete and its removal.
func hammer(ctx context.Context, t *testing.T, s *catalog.Store, w int, done chan struct{}, mu *sync.Mutex, written map[[2]string]bool) {
	spec := catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}
	note := func(rev int64, id string) {
		mu.Lock()
		written[[2]string{fmt.Sprint(rev), id}] = true
		mu.Unlock()
	}
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		default:
		}
		name := fmt.Sprintf("db-%d-%d", (w+rand.IntN(2))%12, rand.IntN(8))
		in, err := s.GetInstanceByName(ctx, "team", name)
		switch {
		case errors.Is(err, catalog.ErrNotFound):
			in, err := s.CreateInstance(ctx, newInstance(name, spec))
			if err == nil {
				note(in.ResourceVersion, in.ID)
			} else if !errors.Is(err, catalog.ErrConflict) {
				t.Errorf("create %s: %v", name, err)
			}
		case err != nil:
			t.Errorf("get %s: %v", name, err)
		case n%4 == 3:
			if d, err := s.DeleteInstance(ctx, in.ID); err == nil && d.ResourceVersion != in.ResourceVersion {
				note(d.ResourceVersion, in.ID)
			}
			_ = s.FinalizeInstance(ctx, in.ID, catalog.EventRecord{Type: "Normal", Reason: "Gone", Message: "Removed."})
		default:
			out, err := s.UpdateInstanceMeta(ctx, in.ID, 0, func(m *catalog.Meta) error {
				m.Labels = map[string]string{"writer": fmt.Sprint(w), "n": fmt.Sprint(n)}
				return nil
			})
			if err == nil {
				note(out.ResourceVersion, in.ID)
			}
		}
	}
}

// waitFollowed waits until f has read the whole feed.
func waitFollowed(t *testing.T, f *follower, all []catalog.Change) {
	want := 0
	for _, c := range all {
		if c.Revision > f.from {
			want++
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.changes)
		f.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkWritten: every write that succeeded is in the feed.
func checkWritten(t *testing.T, all []catalog.Change, written map[[2]string]bool, n int) {
	t.Helper()
	for _, c := range all {
		delete(written, [2]string{fmt.Sprint(c.Revision), c.Object.ID})
	}
	if len(written) > 0 {
		t.Errorf("%d of %d writes are not in the feed", len(written), n)
	}
	t.Logf("%d writes, %d changes in the feed", n, len(all))
}

// checkFollower: f saw every change after its start, once, in revision
// order, and each object's in the order they were made.
func checkFollower(t *testing.T, f *follower, all []catalog.Change, end int64) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var want []string
	for _, c := range all {
		if c.Revision > f.from {
			want = append(want, fmt.Sprint(c.Revision, "/", c.Object.ID))
		}
	}
	last := map[string]int64{}
	var got []string
	for i, c := range f.changes {
		got = append(got, fmt.Sprint(c.Revision, "/", c.Object.ID))
		if i > 0 && c.Revision < f.changes[i-1].Revision {
			t.Errorf("%s: revision %d after %d", f.name, c.Revision, f.changes[i-1].Revision)
		}
		if rv, ok := last[c.Object.ID]; ok && c.Object.ResourceVersion <= rv && c.Type != catalog.Deleted {
			t.Errorf("%s: %s at resourceVersion %d after %d", f.name, c.Object.Name, c.Object.ResourceVersion, rv)
		}
		last[c.Object.ID] = c.Object.ResourceVersion
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s (after %d, to %d): %d changes, want the feed's %d", f.name, f.from, end, len(got), len(want))
	}
}

// checkState: the snapshot's reader holds the objects as the catalog does.
func checkState(t *testing.T, s *catalog.Store, f *follower) {
	t.Helper()
	l, err := s.ListRaw(context.Background(), catalog.KindInstance, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(l.Items) != len(f.state) {
		t.Errorf("%d objects from the snapshot and the feed, the catalog holds %d", len(f.state), len(l.Items))
	}
	for _, o := range l.Items {
		got := f.state[o.ID]
		switch {
		case got == nil:
			t.Errorf("%s: the reader has nothing, the catalog has it at %d", o.Name, o.ResourceVersion)
		case got.ResourceVersion != o.ResourceVersion || fmt.Sprint(got.Labels) != fmt.Sprint(o.Labels):
			t.Errorf("%s: the reader has it at %d with %v, the catalog at %d with %v", o.Name, got.ResourceVersion, got.Labels, o.ResourceVersion, o.Labels)
		}
	}
}
