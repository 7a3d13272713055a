package catalog_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// BenchmarkRelistIcons relists a broker of 100 services (10 plans each)
// with an icon each on its web site, and without: what the icons add to
// the first relist (100 fetched, checked, stored) and to every later one
// (nothing asked for: they are cached).
//
//	go test ./catalog -run '^$' -bench RelistIcons -benchtime 20x
func BenchmarkRelistIcons(b *testing.B) {
	for _, icons := range []bool{false, true} {
		b.Run(fmt.Sprintf("icons=%v", icons), func(b *testing.B) {
			ctx := context.Background()
			pool := pgtest.Pool(b)
			if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
				b.Fatal(err)
			}
			keys, _ := keyring.Parse(keyring.Generate())
			s := catalog.NewStore(pool, keys, nil)
			services := osbtest.GenerateCatalog(100, 10)
			var asked atomic.Int64
			if icons {
				mux := http.NewServeMux()
				for i := range services {
					body := pngOf(b, 64, 64)
					mux.HandleFunc(fmt.Sprintf("/%d.png", i), func(w http.ResponseWriter, _ *http.Request) {
						asked.Add(1)
						_, _ = w.Write(body)
					})
				}
				site := httptest.NewServer(mux)
				b.Cleanup(site.Close)
				for i := range services {
					services[i].Metadata["imageUrl"] = fmt.Sprintf("%s/%d.png", site.URL, i)
				}
			}
			fake := osbtest.New(b, osbtest.WithCatalog(services))
			br := &catalog.Broker{}
			br.Name, br.Spec.URL = "big", fake.URL()
			created, err := s.CreateBroker(ctx, br, nil)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if _, err := s.Relist(ctx, created.ID); err != nil {
				b.Fatal(err)
			}
			first := time.Since(start)
			for b.Loop() {
				if _, err := s.Relist(ctx, created.ID); err != nil {
					b.Fatal(err)
				}
			}
			if icons && asked.Load() != 100 {
				b.Fatalf("the icons were asked for %d times", asked.Load())
			}
			b.ReportMetric(float64(first.Microseconds())/1000, "first-relist-ms")
		})
	}
}
