package catalog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkQuotaUsage reads the usage of every namespace (QuotaUsage, a
// /metrics scrape) and of the largest one (QuotaStatus) at 100,000
// instances and 100,000 bindings in 100 namespaces, half of them in
// ns-00: first while no limit applies to any namespace ("no-limit"), then
// under a default quota that has admitted one more instance and binding in
// each namespace since ("limited"). It reports PostgreSQL's CPU per read
// besides the latency.
func BenchmarkQuotaUsage(b *testing.B) {
	ctx := context.Background()
	s, pool := newPoolStore(b)
	fake := osbtest.New(b, osbtest.WithBasicAuth("u", "p"))
	registerIn(b, s, "", "fake", fake.URL())
	if _, err := s.CreateInstance(ctx, instanceOf("ns-00", "db", osbtest.PlanSync)); err != nil {
		b.Fatal(err)
	}
	bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
	bd.Name, bd.Namespace = "app", "ns-00"
	if _, err := s.CreateBinding(ctx, bd); err != nil {
		b.Fatal(err)
	}
	const ns = `CASE WHEN g < 50000 THEN 'ns-00' ELSE 'ns-' || lpad((g % 99 + 1)::text, 2, '0') END`
	for _, sql := range []string{
		`INSERT INTO catalog.instances (id, namespace, name, class_id, plan_id, metadata, spec, status, generation, resource_version)
		SELECT gen_random_uuid(), ` + ns + `, 'db-' || g, class_id, plan_id, metadata,
			spec || jsonb_build_object('externalID', gen_random_uuid()::text), status, generation, resource_version
		FROM catalog.instances, generate_series(1, 99999) g`,
		`INSERT INTO catalog.bindings (id, namespace, name, instance_id, metadata, spec, status, generation, resource_version)
		SELECT gen_random_uuid(), ` + ns + `, 'app-' || g, NULL, metadata,
			spec || jsonb_build_object('externalID', gen_random_uuid()::text, 'instanceRef', jsonb_build_object('name', 'db-' || g)),
			status, generation, resource_version
		FROM catalog.bindings, generate_series(1, 99999) g`,
		`VACUUM ANALYZE catalog.instances, catalog.bindings`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	reads := func(b *testing.B) {
		var instances, bindings int64
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM catalog.instances WHERE namespace = 'ns-00'),
			(SELECT count(*) FROM catalog.bindings WHERE namespace = 'ns-00')`).Scan(&instances, &bindings); err != nil {
			b.Fatal(err)
		}
		b.Run("QuotaUsage", func(b *testing.B) {
			readLoop(b, pool, func() error {
				u, err := s.QuotaUsage(ctx)
				if err == nil && len(u) != 100 {
					err = fmt.Errorf("%d namespaces", len(u))
				}
				return err
			})
		})
		b.Run("QuotaStatus", func(b *testing.B) {
			readLoop(b, pool, func() error {
				st, err := s.QuotaStatus(ctx, "ns-00")
				if err == nil && (st.Instances.Used != instances || st.Bindings.Used != bindings) {
					err = fmt.Errorf("status %+v", st)
				}
				return err
			})
		})
	}
	b.Run("no-limit", reads)
	if _, err := s.SetQuota(ctx, &catalog.Quota{Instances: limit(1_000_000), Bindings: limit(1_000_000), PaidPlans: true}); err != nil {
		b.Fatal(err)
	}
	// The first creation under a limit counts the namespace once.
	for i := range 100 {
		ns := fmt.Sprintf("ns-%02d", i)
		if _, err := s.CreateInstance(ctx, instanceOf(ns, "first", osbtest.PlanSync)); err != nil {
			b.Fatal(err)
		}
		bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "first"}}}
		bd.Name, bd.Namespace = "first", ns
		if _, err := s.CreateBinding(ctx, bd); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE catalog.instances, catalog.bindings, catalog.namespace_counts`); err != nil {
		b.Fatal(err)
	}
	b.Run("limited", reads)
}

// readLoop times read and reports PostgreSQL's CPU per call.
func readLoop(b *testing.B, pool *pgxpool.Pool, read func() error) {
	pg0 := pgtest.BackendsCPU(b, pool)
	for b.Loop() {
		if err := read(); err != nil {
			b.Fatal(err)
		}
	}
	var pg time.Duration
	for pid, t := range pgtest.BackendsCPU(b, pool) {
		pg += t - pg0[pid]
	}
	b.ReportMetric(float64(pg.Microseconds())/float64(b.N), "pg-cpu-us/op")
}
