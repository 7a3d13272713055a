package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// instancesForScan registers a fake broker and creates n instances
// db-0000… in namespace team.
func instancesForScan(t *testing.T, s *catalog.Store, n int) {
	t.Helper()
	ctx := context.Background()
	fake := osbtest.New(t)
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	spec := catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				if _, err := s.CreateInstance(ctx, newInstance(fmt.Sprintf("db-%04d", i), spec)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestScanRawOneSnapshot reads 1,100 instances in chunks while another
// writer creates and changes some: the read sees none of those changes,
// every chunk carries the snapshot's revision, and a read of at most 600
// knows its continue token before its first chunk.
func TestScanRawOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	instancesForScan(t, s, 1100)
	spec := catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}
	var sizes []int
	var revs []int64
	names := map[string]map[string]string{}
	err := s.ScanRaw(ctx, catalog.KindInstance, catalog.ListOptions{}, func(rev int64, cont string, items []*catalog.RawObject) error {
		if cont != "" {
			t.Errorf("unpaged read with continue %q", cont)
		}
		if len(sizes) == 0 {
			// After the snapshot: a new object at the end, a change near it.
			if _, err := s.CreateInstance(ctx, newInstance("db-9999", spec)); err != nil {
				return err
			}
			last, err := s.GetInstanceByName(ctx, "team", "db-1099")
			if err != nil {
				return err
			}
			if _, err := s.UpdateInstance(ctx, last.ID, 0, func(in *catalog.Instance) error {
				in.Labels = map[string]string{"changed": "yes"}
				return nil
			}); err != nil {
				return err
			}
		}
		sizes, revs = append(sizes, len(items)), append(revs, rev)
		for _, o := range items {
			names[o.Name] = o.Labels
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sizes) != "[500 500 100]" {
		t.Errorf("chunks of %v, want [500 500 100]", sizes)
	}
	if len(names) != 1100 || names["db-9999"] != nil || names["db-1099"]["changed"] != "" {
		t.Errorf("read %d objects (db-9999 %v, db-1099 labels %v): the snapshot moved", len(names), names["db-9999"] != nil, names["db-1099"])
	}
	now, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs {
		if r != revs[0] || r >= now {
			t.Errorf("revisions %v, the catalog's now %d", revs, now)
		}
	}

	// A read of at most 600, then the rest from its token.
	var first []string
	var cont string
	if err := s.ScanRaw(ctx, catalog.KindInstance, catalog.ListOptions{Limit: 600}, func(_ int64, c string, items []*catalog.RawObject) error {
		cont = c
		for _, o := range items {
			first = append(first, o.Name)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(first) != 600 || first[599] != "db-0599" || cont == "" {
		t.Fatalf("first read: %d objects, last %s, continue %q", len(first), first[len(first)-1], cont)
	}
	var rest []string
	if err := s.ScanRaw(ctx, catalog.KindInstance, catalog.ListOptions{Limit: 600, Continue: cont}, func(_ int64, c string, items []*catalog.RawObject) error {
		if c != "" {
			t.Errorf("last read with continue %q", c)
		}
		for _, o := range items {
			rest = append(rest, o.Name)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rest) != 501 || rest[0] != "db-0600" || rest[500] != "db-9999" {
		t.Errorf("second read: %d objects, from %s to %s", len(rest), rest[0], rest[len(rest)-1])
	}
}

// TestScanRawExpires holds a snapshot longer than the store allows: the
// read stops with ErrSnapshotExpired.
func TestScanRawExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, catalog.WithSnapshotLimit(300*time.Millisecond))
	instancesForScan(t, s, 501)
	calls := 0
	err := s.ScanRaw(ctx, catalog.KindInstance, catalog.ListOptions{}, func(int64, string, []*catalog.RawObject) error {
		calls++
		time.Sleep(500 * time.Millisecond)
		return nil
	})
	if !errors.Is(err, catalog.ErrSnapshotExpired) || calls != 1 {
		t.Errorf("after %d chunks: %v, want ErrSnapshotExpired after 1", calls, err)
	}
	// The store reads on: the connection is not left in a transaction.
	if _, err := s.ListRaw(ctx, catalog.KindInstance, catalog.ListOptions{Limit: 10}); err != nil {
		t.Fatal(err)
	}
}
