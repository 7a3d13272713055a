package catalog

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// BenchmarkFeedPage1000 reads one page of 1,000 changes (500 instances and
// their 500 bindings) as the watch hub does when it catches up (every
// kind, with documents and Extra) and as the engine does (instances and
// bindings, names only); a binding's change with its instance's id.
func BenchmarkFeedPage1000(b *testing.B) {
	for _, bc := range []struct {
		name      string
		kinds     []string
		documents bool
	}{
		{"hub", nil, true},
		{"engine", []string{KindInstance, KindBinding}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchFeed(b, func(ctx context.Context, s *Store, after int64) (int, error) {
				page, err := s.feed.since(ctx, after, math.MaxInt64, bc.kinds, 1000, bc.documents)
				return len(page), err
			})
		})
	}
}

func benchFeed(b *testing.B, read func(ctx context.Context, s *Store, after int64) (int, error)) {
	ctx := context.Background()
	pool := pgtest.Pool(b)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		b.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	s := NewStore(pool, keys, nil)
	fake := osbtest.New(b, osbtest.WithBasicAuth("u", "p"))
	br := &Broker{Spec: BrokerSpec{URL: fake.URL()}}
	br.Name = "fake"
	br, err := s.CreateBroker(ctx, br, &BrokerAuth{Basic: &BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Relist(ctx, br.ID); err != nil {
		b.Fatal(err)
	}
	start, err := s.Revision(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 500 {
		in := &Instance{Spec: InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
		in.Name, in.Namespace = fmt.Sprintf("in-%d", i), "team"
		if _, err := s.CreateInstance(ctx, in); err != nil {
			b.Fatal(err)
		}
		bd := &Binding{Spec: BindingSpec{InstanceRef: ObjectRef{Name: in.Name}}}
		bd.Name, bd.Namespace = in.Name, "team"
		if _, err := s.CreateBinding(ctx, bd); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		n, err := read(ctx, s, start)
		if err != nil || n != 1000 {
			b.Fatalf("%d changes, %v", n, err)
		}
	}
}
