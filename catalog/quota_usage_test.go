package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestQuotaUsageFollowsChurn: QuotaStatus and QuotaUsage say what counting
// the rows says, objects being deleted included, while creations,
// deletions and removals race in several namespaces: under a quota of
// their own, one that limits bindings and a plan only (its instances have
// no count kept), under a ResourceQuota, under a quota set in the middle
// of the churn, under none, and in one whose objects all go after its
// quota did.
func TestQuotaUsageFollowsChurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	registerIn(t, s, "", "fake", fake.URL())
	for _, q := range []*catalog.Quota{
		{Namespace: "quota-a", Instances: limit(1000), Bindings: limit(1000), PaidPlans: true,
			Plans: []catalog.PlanQuota{{Class: osbtest.DefaultService, Plan: osbtest.PlanAsync, Instances: 1000}}},
		{Namespace: "quota-b", Bindings: limit(1000), PaidPlans: true,
			Plans: []catalog.PlanQuota{{Class: osbtest.DefaultService, Plan: osbtest.PlanSync, Instances: 1000}}},
		{Namespace: "gone", Instances: limit(1000), Bindings: limit(1000), PaidPlans: true},
	} {
		if _, err := s.SetQuota(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	many := int64(1000)
	if err := s.PutResourceQuota(ctx, catalog.ResourceQuota{Namespace: "rq", Name: "objects", Instances: &many, Bindings: &many}); err != nil {
		t.Fatal(err)
	}
	namespaces := []string{"quota-a", "quota-b", "rq", "late", "free", "gone"}

	type churner struct {
		ns                   string
		id                   int
		instances, bindings  []string // ids, not being deleted
		deletingI, deletingB []string
		made                 int
	}
	var churners []*churner
	for _, ns := range namespaces {
		for range 2 { // two at once in each namespace
			churners = append(churners, &churner{ns: ns, id: len(churners)})
		}
	}
	removed := catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Gone."}
	// step does one thing at random in c's namespace; in "gone", after the
	// second round, only deletions and removals.
	step := func(c *churner, r *rand.Rand, creating bool) error {
		c.made++
		name := fmt.Sprintf("c%d-%d", c.id, c.made)
		switch k := r.IntN(6); {
		case creating && k <= 1:
			plan := osbtest.PlanSync
			if k == 1 {
				plan = osbtest.PlanAsync
			}
			in, err := s.CreateInstance(ctx, instanceOf(c.ns, name, plan))
			if err != nil {
				return err
			}
			c.instances = append(c.instances, in.ID)
		case creating && k == 2:
			b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: name}}}
			b.Name, b.Namespace = name, c.ns
			b, err := s.CreateBinding(ctx, b)
			if err != nil {
				return err
			}
			c.bindings = append(c.bindings, b.ID)
		case (k == 3 || !creating) && len(c.instances) > 0:
			i := r.IntN(len(c.instances))
			if _, err := s.DeleteInstance(ctx, c.instances[i]); err != nil {
				return err
			}
			c.deletingI = append(c.deletingI, c.instances[i])
			c.instances = slices.Delete(c.instances, i, i+1)
		case k == 4 && len(c.bindings) > 0:
			i := r.IntN(len(c.bindings))
			if _, err := s.DeleteBinding(ctx, c.bindings[i]); err != nil {
				return err
			}
			c.deletingB = append(c.deletingB, c.bindings[i])
			c.bindings = slices.Delete(c.bindings, i, i+1)
		case len(c.deletingI) > 0:
			if err := s.FinalizeInstance(ctx, c.deletingI[0], removed); err != nil {
				return err
			}
			c.deletingI = c.deletingI[1:]
		case len(c.deletingB) > 0:
			if err := s.FinalizeBinding(ctx, c.deletingB[0], removed); err != nil {
				return err
			}
			c.deletingB = c.deletingB[1:]
		}
		return nil
	}
	for round := range 4 {
		var wg sync.WaitGroup
		for i, c := range churners {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round), uint64(i)))
				creating := c.ns != "gone" || round < 2
				for range 40 {
					if err := step(c, r, creating); err != nil {
						t.Errorf("%s: %v", c.ns, err)
						return
					}
				}
				if c.ns == "gone" && !creating {
					for _, in := range c.instances {
						if _, err := s.DeleteInstance(ctx, in); err != nil {
							t.Error(err)
						}
						c.deletingI = append(c.deletingI, in)
					}
					c.instances = nil
					for _, b := range c.bindings {
						if _, err := s.DeleteBinding(ctx, b); err != nil {
							t.Error(err)
						}
						c.deletingB = append(c.deletingB, b)
					}
					c.bindings = nil
					for len(c.deletingI)+len(c.deletingB) > 0 {
						if err := step(c, r, false); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		if round == 1 {
			// A limit that starts to apply while objects come and go, and
			// one that stops.
			wg.Go(func() {
				if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "late", Instances: limit(1000), Bindings: limit(1000), PaidPlans: true}); err != nil {
					t.Error(err)
				}
				if err := s.DeleteQuota(ctx, "gone"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		checkUsage(t, s, pool, namespaces)
	}
	// What the test means to cover was there: namespaces counted in rows
	// and namespaces not, objects being deleted, a namespace emptied.
	var counted []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(DISTINCT namespace ORDER BY namespace) FROM catalog.namespace_counts`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(counted, []string{"gone", "late", "quota-a", "quota-b", "rq"}) {
		t.Errorf("namespaces with counts kept: %v", counted)
	}
	var deleting, left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM catalog.instances WHERE deletion_timestamp IS NOT NULL)
			+ (SELECT count(*) FROM catalog.bindings WHERE deletion_timestamp IS NOT NULL),
		(SELECT count(*) FROM catalog.instances WHERE namespace = 'gone') + (SELECT count(*) FROM catalog.bindings WHERE namespace = 'gone')`).
		Scan(&deleting, &left); err != nil {
		t.Fatal(err)
	}
	if deleting == 0 || left != 0 {
		t.Errorf("%d objects being deleted, %d left in gone; want some and none", deleting, left)
	}
}

// checkUsage compares QuotaStatus of each of namespaces, and QuotaUsage,
// with the rows counted.
func checkUsage(t *testing.T, s *catalog.Store, pool *pgxpool.Pool, namespaces []string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range namespaces {
		st, err := s.QuotaStatus(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		var instances, bindings int64
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM catalog.instances WHERE namespace = $1),
			(SELECT count(*) FROM catalog.bindings WHERE namespace = $1)`, ns).Scan(&instances, &bindings); err != nil {
			t.Fatal(err)
		}
		if st.Instances.Used != instances || st.Bindings.Used != bindings {
			t.Errorf("%s: status says %d instances and %d bindings, the rows %d and %d", ns, st.Instances.Used, st.Bindings.Used, instances, bindings)
		}
		for _, p := range st.Plans {
			var n int64
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.instances WHERE namespace = $1 AND plan_id = $2`, ns, p.PlanID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if p.Used != n {
				t.Errorf("%s: status says %d instances of plan %s, the rows %d", ns, p.Used, p.Plan, n)
			}
		}
	}
	usage, err := s.QuotaUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := pool.Query(ctx, `SELECT namespace, sum(i), sum(b), sum(k) FROM (
			SELECT namespace, 1 AS i, 0 AS b, 0 AS k FROM catalog.instances
			UNION ALL SELECT namespace, 0, 1, 0 FROM catalog.bindings
			UNION ALL SELECT namespace, 0, 0, 1 FROM catalog.brokers WHERE namespace <> ''
			UNION ALL SELECT namespace, 0, 0, 0 FROM catalog.quotas WHERE namespace <> ''
			UNION ALL SELECT namespace, 0, 0, 0 FROM catalog.resource_quotas) AS c
		GROUP BY namespace ORDER BY namespace`)
	want, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var ns string
		var i, b, k int64
		err := row.Scan(&ns, &i, &b, &k)
		return fmt.Sprintf("%s %d %d %d", ns, i, b, k), err
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range usage {
		got = append(got, fmt.Sprintf("%s %d %d %d", u.Namespace, u.Instances.Used, u.Bindings.Used, u.Brokers.Used))
	}
	if !slices.Equal(got, want) {
		t.Errorf("usage %q, the rows %q", got, want)
	}
}

// TestQuotaUsageReadsCounts: at 20,000 instances and 20,000 bindings in
// namespaces that all have counts, QuotaUsage reads their counts and not
// their objects, and the planner, which costs what it may read, sees no
// reason to compile the statement (JIT, seconds on a busy machine).
// Before, it counted every object.
func TestQuotaUsageReadsCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	for _, sql := range []string{
		`INSERT INTO catalog.instances (id, namespace, name, spec, resource_version)
		SELECT gen_random_uuid(), 'ns-' || g % 10, 'db-' || g, jsonb_build_object('externalID', gen_random_uuid()::text), 1
		FROM generate_series(1, 20000) g`,
		`INSERT INTO catalog.bindings (id, namespace, name, spec, resource_version)
		SELECT gen_random_uuid(), 'ns-' || g % 10, 'app-' || g, jsonb_build_object('externalID', gen_random_uuid()::text), 1
		FROM generate_series(1, 20000) g`,
		// What admission does the first time a limit applies to a
		// namespace (no write races this one).
		`SELECT catalog.counted(n, r) FROM (SELECT DISTINCT namespace FROM catalog.instances) AS ns(n),
			unnest(ARRAY['instances', 'bindings']) AS r`,
		`VACUUM ANALYZE catalog.instances, catalog.bindings, catalog.namespace_counts`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var out []struct {
		Plan map[string]any
		JIT  any
	}
	if err := pool.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+catalog.QuotaUsageSQL).Scan(&out); err != nil {
		t.Fatal(err)
	}
	// The rows each node produced from the objects' tables.
	var read float64
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if rel := n["Relation Name"]; rel == "instances" || rel == "bindings" {
			read += n["Actual Rows"].(float64) * n["Actual Loops"].(float64)
		}
		subs, _ := n["Plans"].([]any)
		for _, sub := range subs {
			walk(sub.(map[string]any))
		}
	}
	walk(out[0].Plan)
	// An index descent for each namespace, and one past the last, in each
	// table.
	if read > 2*11 || out[0].JIT != nil {
		plan, _ := json.MarshalIndent(out[0], "", "  ")
		t.Errorf("QuotaUsage read %.0f rows of objects, want at most 22, or was compiled:\n%s", read, plan)
	}
	usage, err := s.QuotaUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) != 10 || usage[0].Namespace != "ns-0" || usage[0].Instances.Used != 2000 || usage[0].Bindings.Used != 2000 {
		t.Errorf("usage %+v", usage)
	}
}

// TestQuotaUsageWhateverTheCollation: the ResourceQuotas' limits reach
// QuotaUsage however the database sorts text. Under a collation that
// ignores punctuation (glibc's en_US.UTF-8, a common default, sorts team1
// before team-a; so does ICU's with punctuation shifted, used here), the
// quotas were read in that order and looked for in Go's byte order, and
// the limits of both namespaces were lost.
func TestQuotaUsageWhateverTheCollation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	for _, sql := range []string{
		`CREATE COLLATION punctuation_ignored (provider = icu, locale = 'en-US-u-ka-shifted')`,
		`ALTER TABLE catalog.resource_quotas ALTER COLUMN namespace TYPE text COLLATE punctuation_ignored`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var sorted []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(n ORDER BY n COLLATE punctuation_ignored) FROM unnest(ARRAY['team-a', 'team1']) n`).Scan(&sorted); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sorted, []string{"team1", "team-a"}) {
		t.Fatalf("the collation sorts %q: it does not ignore punctuation", sorted)
	}
	want := map[string]int64{"team-a": 2, "team1": 3}
	for ns, n := range want {
		if err := s.PutResourceQuota(ctx, catalog.ResourceQuota{Namespace: ns, Name: "q", Instances: &n}); err != nil {
			t.Fatal(err)
		}
	}
	usage, err := s.QuotaUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range usage {
		if n, ok := want[u.Namespace]; ok {
			if u.Instances.Limit == nil || *u.Instances.Limit != n || u.Instances.Source != "ResourceQuota/q" {
				t.Errorf("%s: instances limit %v from %q, want %d from ResourceQuota/q", u.Namespace, u.Instances.Limit, u.Instances.Source, n)
			}
			delete(want, u.Namespace)
		}
	}
	if len(want) > 0 {
		t.Errorf("no usage for %v", want)
	}
}
