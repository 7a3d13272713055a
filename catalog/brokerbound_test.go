package catalog_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestBrokersPerNamespaceBounded: a namespace may have as many brokers of
// its own as the store allows (WithMaxBrokersPerNamespace), one more is
// refused with the quota sentence every door shows, naming the flag, and
// the namespace's quota status says so; a ResourceQuota on
// count/servicebrokers bounds it too, the stricter winning; other
// namespaces and the cluster's brokers are not held by it, a deletion makes
// room, and creations racing for the last room take it once.
func TestBrokersPerNamespaceBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, catalog.WithMaxBrokersPerNamespace(3))
	create := func(namespace, name string) (*catalog.Broker, error) {
		b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: "https://broker.example/" + name}}
		b.Name, b.Namespace = name, namespace
		return s.CreateBroker(ctx, b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	}
	var first *catalog.Broker
	for i := range 3 {
		b, err := create("team-a", fmt.Sprintf("b%d", i))
		if err != nil {
			t.Fatalf("broker %d of 3: %v", i, err)
		}
		if i == 0 {
			first = b
		}
	}
	_, err := create("team-a", "b3")
	q, ok := catalog.AsQuota(err)
	if !ok || q.Resource != catalog.QuotaBrokers || q.Limit != 3 || q.Used != 3 ||
		err.Error() != "namespace team-a may have 3 brokers and has 3 (--max-brokers-per-namespace)" {
		t.Fatalf("a fourth broker: %v (%+v), want the quota's refusal", err, q)
	}
	// A dry run (kubectl create --dry-run=server) is refused the same way.
	dry := &catalog.Broker{Spec: catalog.BrokerSpec{URL: "https://broker.example/dry"}}
	dry.Name, dry.Namespace = "dry", "team-a"
	if _, err := s.CheckBroker(ctx, dry); err == nil || err.Error() != "namespace team-a may have 3 brokers and has 3 (--max-brokers-per-namespace)" {
		t.Errorf("a fourth broker's dry run: %v, want the quota's refusal", err)
	}
	if dry.ID != "" || dry.Generation != 0 {
		t.Errorf("the dry run changed the broker it checked: id %q, generation %d", dry.ID, dry.Generation)
	}
	st, err := s.QuotaStatus(ctx, "team-a")
	if err != nil || st.Brokers.Used != 3 || st.Brokers.Limit == nil || *st.Brokers.Limit != 3 || st.Brokers.Source != catalog.SourceServer {
		t.Errorf("team-a's quota status: %+v (%v), want 3 brokers of 3 by the server", st, err)
	}
	if _, err := create("team-b", "b0"); err != nil {
		t.Errorf("another namespace's first broker: %v", err)
	}
	// A ResourceQuota on count/servicebrokers: the stricter bound wins.
	one, ten := int64(1), int64(10)
	for _, rq := range []catalog.ResourceQuota{{Namespace: "team-b", Name: "objects", Brokers: &one}, {Namespace: "team-a", Name: "loose", Brokers: &ten}} {
		if err := s.PutResourceQuota(ctx, rq); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := create("team-b", "b1"); err == nil || err.Error() != "namespace team-b may have 1 broker and has 1 (ResourceQuota objects)" {
		t.Errorf("a broker past team-b's ResourceQuota: %v", err)
	}
	if st, err := s.QuotaStatus(ctx, "team-b"); err != nil || st.Brokers.Limit == nil || *st.Brokers.Limit != 1 || st.Brokers.Source != "ResourceQuota/objects" {
		t.Errorf("team-b's quota status: %+v (%v), want 1 broker of 1 by ResourceQuota objects", st, err)
	}
	usage, err := s.QuotaUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range usage {
		got = append(got, fmt.Sprintf("%s %d/%d %s", u.Namespace, u.Brokers.Used, *u.Brokers.Limit, u.Brokers.Source))
	}
	if want := []string{"team-a 3/3 server", "team-b 1/1 ResourceQuota/objects"}; !slices.Equal(got, want) {
		t.Errorf("the namespaces' usage: %q, want %q", got, want)
	}
	if _, err := create("team-a", "b4"); err == nil || err.Error() != "namespace team-a may have 3 brokers and has 3 (--max-brokers-per-namespace)" {
		t.Errorf("a fourth broker of team-a, whose ResourceQuota allows 10: %v, want the server's 3", err)
	}
	for i := range 5 {
		if _, err := create("", fmt.Sprintf("cluster-%d", i)); err != nil {
			t.Errorf("cluster broker %d: %v", i, err)
		}
	}
	if err := s.DeleteBroker(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := create("team-a", "b3"); err != nil {
		t.Errorf("a broker after one was deleted: %v", err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() { _, errs[i] = create("team-c", fmt.Sprintf("racer-%d", i)) })
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		if _, ok := catalog.AsQuota(err); err != nil && !ok {
			t.Errorf("racing creation: %v", err)
		}
		if err == nil {
			made++
		}
	}
	if made != 3 {
		t.Errorf("10 racing creations made %d brokers, want 3", made)
	}
}
