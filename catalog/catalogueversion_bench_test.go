package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// BenchmarkRelistUnchanged relists a broker whose catalogue (10 services
// of 10 plans) did not change since its last fetch. Reported with the WAL
// each relist writes, the class and plan rows it writes again, and the
// steps the catalogue's version takes (each one costs the next creation
// of every namespace a retry). Run it alone: the WAL is the server's.
//
//	go test -run '^$' -bench 'Relist(Unchanged|NotModified|Reordered)' ./catalog/
func BenchmarkRelistUnchanged(b *testing.B) { benchRelist(b, false) }

// BenchmarkRelistNotModified is BenchmarkRelistUnchanged with a broker
// that sends an ETag and answers 304 Not Modified when asked with it.
func BenchmarkRelistNotModified(b *testing.B) { benchRelist(b, false, osbtest.WithCatalogETag()) }

// BenchmarkRelistReordered is BenchmarkRelistUnchanged with a catalogue
// whose services come in the reverse order at every other fetch: every
// row's position is written, and the catalogue's version stays.
func BenchmarkRelistReordered(b *testing.B) { benchRelist(b, true) }

func benchRelist(b *testing.B, reorder bool, opts ...osbtest.Option) {
	ctx := context.Background()
	s, pool := newPoolStore(b)
	orders := [2][]osbtest.Service{osbtest.GenerateCatalog(10, 10)}
	orders[1] = slices.Clone(orders[0])
	slices.Reverse(orders[1])
	fake := osbtest.New(b, append(opts, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(orders[0]))...)
	br := register(b, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, br.ID); err != nil {
		b.Fatal(err)
	}
	version := catalogueVersion(b, pool)
	var wal, rewritten, n int64
	for b.Loop() {
		b.StopTimer()
		if reorder {
			fake.SetCatalog(orders[(n+1)%2])
		}
		rows := catalogueRows(b, pool)
		var lsn string
		if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := s.Relist(ctx, br.ID); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		var bytes int64
		if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&bytes); err != nil {
			b.Fatal(err)
		}
		wal += bytes
		for id, ctid := range catalogueRows(b, pool) {
			if rows[id] != ctid {
				rewritten++
			}
		}
		n++
		b.StartTimer()
	}
	b.ReportMetric(float64(wal)/float64(n), "wal-B/op")
	b.ReportMetric(float64(rewritten)/float64(n), "rows-written/op")
	b.ReportMetric(float64(catalogueVersion(b, pool)-version)/float64(n), "version-steps/op")
}

// BenchmarkCreationsBesideRelists creates instances of team-b's broker
// while team-a's broker, whose catalogue does not change, is relisted
// every 100 ms by another replica: back to back, and one every 100 ms (a
// team that creates now and then); and one every 100 ms while team-a's
// broker sends its services in the reverse order at every other fetch,
// as a broker built on an unordered map may. Reported with the attempts each
// creation took (a creation that used classes and plans read before the
// catalogue's version moved is made again) and its round trips.
//
//	go test -run '^$' -bench CreationsBesideRelists -benchtime 200x ./catalog/
func BenchmarkCreationsBesideRelists(b *testing.B) {
	for _, bc := range []struct {
		name    string
		pause   time.Duration
		reorder bool
	}{{"back-to-back", 0, false}, {"one-every-100ms", 100 * time.Millisecond, false}, {"one-every-100ms-reordered", 100 * time.Millisecond, true}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			url := pgtest.New(b)
			keys, _ := keyring.Parse(keyring.Generate())
			other, err := pgxpool.New(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(other.Close)
			if err := migrations.Up(ctx, other, migrations.Catalog); err != nil {
				b.Fatal(err)
			}
			relister := catalog.NewStore(other, keys, nil)
			trips := &checkedTrips{}
			s := catalog.NewStore(tracedPool(b, url, trips), keys, nil)

			orders := [2][]osbtest.Service{osbtest.GenerateCatalog(10, 10)}
			orders[1] = slices.Clone(orders[0])
			slices.Reverse(orders[1])
			noisy := osbtest.New(b, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(orders[0]))
			quiet := osbtest.New(b, osbtest.WithBasicAuth("u", "p"))
			auth := &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}}
			var brokers [2]*catalog.Broker
			for i, fake := range []*osbtest.Broker{noisy, quiet} {
				br := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
				br.Name, br.Namespace = "fake", []string{"team-a", "team-b"}[i]
				if brokers[i], err = relister.CreateBroker(ctx, br, auth); err != nil {
					b.Fatal(err)
				}
				if _, err := relister.Relist(ctx, brokers[i].ID); err != nil {
					b.Fatal(err)
				}
			}
			created := 0
			create := func() {
				in := &catalog.Instance{Spec: catalog.InstanceSpec{ServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanSync}}
				in.Name, in.Namespace = fmt.Sprintf("db-%d", created), "team-b"
				created++
				if _, err := s.CreateInstance(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			for range 3 {
				create() // statements prepared, the plan read
			}

			relistCtx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() {
				t := time.NewTicker(100 * time.Millisecond)
				defer t.Stop()
				for i := 1; ; i++ {
					select {
					case <-relistCtx.Done():
						return
					case <-t.C:
					}
					if bc.reorder {
						noisy.SetCatalog(orders[i%2])
					}
					if _, err := relister.Relist(relistCtx, brokers[0].ID); err != nil && relistCtx.Err() == nil {
						b.Error(err)
					}
				}
			})
			trips.n.Store(0)
			trips.refused.Store(0)
			n := 0
			for b.Loop() {
				if bc.pause > 0 {
					b.StopTimer()
					time.Sleep(bc.pause)
					b.StartTimer()
				}
				create()
				n++
			}
			stop()
			wg.Wait()
			b.ReportMetric(float64(int64(n)+trips.refused.Load())/float64(n), "attempts/creation")
			b.ReportMetric(float64(trips.n.Load())/float64(n), "round-trips/creation")
		})
	}
}

// checkedTrips counts round trips as roundTrips does, and the statements
// refused because the catalogue's version moved (SQLSTATE BDC01): each is
// one more attempt of a creation.
type checkedTrips struct {
	roundTrips
	refused atomic.Int64
}

func (c *checkedTrips) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	c.count(d.Err)
}

func (c *checkedTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.count(d.Err)
}

func (c *checkedTrips) count(err error) {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "BDC01" {
		c.refused.Add(1)
	}
}
