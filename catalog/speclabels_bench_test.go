package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// BenchmarkSpecLabelsTrigger measures what deriving Service Catalog's
// labels costs a write: one statement rewriting the spec of 1,000
// instances, with the trigger of migration 0009 and with it disabled, side
// by side in each iteration.
func BenchmarkSpecLabelsTrigger(b *testing.B) {
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
	for i := range 1000 {
		in := &Instance{Spec: InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
		in.Name, in.Namespace = fmt.Sprintf("in-%d", i), "team"
		if _, err := s.CreateInstance(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	rewrite := func() time.Duration {
		start := time.Now()
		if _, err := pool.Exec(ctx, `UPDATE catalog.instances SET spec = spec || '{}'`); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var with, without time.Duration
	b.ResetTimer()
	for range b.N {
		with += rewrite()
		if _, err := pool.Exec(ctx, `ALTER TABLE catalog.instances DISABLE TRIGGER instances_spec_labels`); err != nil {
			b.Fatal(err)
		}
		without += rewrite()
		if _, err := pool.Exec(ctx, `ALTER TABLE catalog.instances ENABLE TRIGGER instances_spec_labels`); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(with.Microseconds())/float64(b.N)/1000, "µs/row-with")
	b.ReportMetric(float64(without.Microseconds())/float64(b.N)/1000, "µs/row-without")
}
