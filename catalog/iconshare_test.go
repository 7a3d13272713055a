package catalog_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestServiceIconsShareOfTable: a namespace's broker whose every relist
// names 256 new icons, none of which can be fetched, keeps no more than
// its own share of the icon table, its icons no service names any more
// going at its next relist, and a cluster broker registered after it
// still gets its icon. Before, the table had one bound for all brokers,
// counting failed fetches and keeping icons no service named for an hour:
// 16 such relists filled it, and no other broker's icon was stored.
func TestServiceIconsShareOfTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	round := func(n int) []osbtest.Service {
		services := make([]osbtest.Service, 256)
		for i := range services {
			id := fmt.Sprintf("r%d-s%d", n, i)
			services[i] = osbtest.Service{ID: id, Name: id, Description: "A service.",
				Metadata: map[string]any{"imageUrl": fmt.Sprintf("ftp://icons.invalid/%d/%d.png", n, i)},
				Plans:    []osbtest.Plan{{ID: id + "-p", Name: "p", Description: "A plan."}}}
		}
		return services
	}
	tenant := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(round(0)))
	tb := registerIn(t, s, "team-a", "icons", tenant.URL())
	for n := 1; n <= 17; n++ {
		tenant.SetCatalog(round(n))
		if _, err := s.Relist(ctx, tb.ID); err != nil {
			t.Fatal(err)
		}
	}
	var kept int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.service_icons`).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept > 256 {
		t.Errorf("the tenant's broker keeps %d icons after 17 relists, want at most its share of 256", kept)
	}
	services := osbtest.DefaultCatalog()
	services[0].Metadata = map[string]any{"imageUrl": "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngOf(t, 16, 16))}
	cluster := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(services))
	registerIn(t, s, "", "cluster", cluster.URL())
	if _, err := classIcon(t, s, services, 0); err != nil {
		t.Errorf("the cluster broker's icon after a tenant's broker named %d icons: %v", 18*256, err)
	}
}

// TestServiceIconsOfTwoBrokers: two brokers naming the same icon each
// keep it, and one that stops naming it takes it away from itself only.
func TestServiceIconsOfTwoBrokers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	icon := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngOf(t, 8, 8))
	one, two := iconCatalog(icon), iconCatalog(icon)
	fakeOne := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(one))
	fakeTwo := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(two))
	registerIn(t, s, "", "one", fakeOne.URL())
	bTwo := registerIn(t, s, "", "two", fakeTwo.URL())
	for _, c := range [][]osbtest.Service{one, two} {
		if _, err := classIcon(t, s, c, 0); err != nil {
			t.Fatalf("a shared icon: %v", err)
		}
	}
	// Broker two stops naming it.
	without := iconCatalog(icon)
	without[0].ID, without[0].Plans[0].ID = two[0].ID, two[0].Plans[0].ID
	delete(without[0].Metadata, "imageUrl")
	fakeTwo.SetCatalog(without)
	if _, err := s.Relist(ctx, bTwo.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := classIcon(t, s, one, 0); err != nil {
		t.Errorf("broker one's icon after broker two stopped naming it: %v", err)
	}
}
