package catalog_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// TestFeedPagePlanStaysSmall: a page of the feed with one change is
// planned as one, however long the feed: the page's end was a bound the
// planner could not know, which made it take a range of revisions for
// 0.5 % of the table's rows, and past some 300,000 changes it launched a
// parallel worker for every page the engine read (10-35 ms a page). The
// plan is PostgreSQL's own (auto_explain, sent to the client), over 20,000
// changes; the old statement was planned for 800 rows there.
func TestFeedPagePlanStaysSmall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var plans []string
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		plans = append(plans, n.Message)
		mu.Unlock()
	}
	var explain atomic.Bool
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if !explain.Load() {
			return nil
		}
		for _, q := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`, `SET auto_explain.log_level = notice`} {
			if _, err := c.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	const n = 20000
	if _, err := pool.Exec(ctx, `INSERT INTO catalog.changes (revision, kind, object_id, namespace, name, type, object)
		SELECT g, 'ServiceBinding', gen_random_uuid(), 'team', 'b' || g, 'ADDED', '{}' FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SELECT setval('catalog.revisions', 20000)`, `ANALYZE catalog.changes`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := keyring.Parse(keyring.Generate())
	s := catalog.NewStore(pool, keys, nil)
	if _, err := s.CreateInstance(ctx, newInstance("db", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"})); err != nil {
		t.Fatal(err)
	}
	// From here on, every connection sends its plans.
	explain.Store(true)
	pool.Reset()
	page, err := s.Feed().Read(ctx, n, []string{catalog.KindInstance, catalog.KindBinding}, 1000)
	if err != nil || len(page.Changes) != 1 {
		t.Fatalf("read the page after %d: %d changes, %v", n, len(page.Changes), err)
	}
	mu.Lock()
	defer mu.Unlock()
	rows := regexp.MustCompile(`^\s*\S.*\(cost=[0-9.]+ rows=([0-9]+)`)
	found := false
	for _, p := range plans {
		if !strings.Contains(p, "WITH page AS") {
			continue
		}
		for _, line := range strings.Split(p, "\n") {
			if !strings.Contains(line, "cost=") {
				continue
			}
			m := rows.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			found = true
			if est, _ := strconv.Atoi(m[1]); est > 10 || strings.Contains(p, "Gather") {
				t.Errorf("a page of one change planned for %d rows:\n%s", est, p)
			}
			break
		}
	}
	if !found {
		t.Fatalf("no plan of the page's read among %d", len(plans))
	}
}
