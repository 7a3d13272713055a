package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func newStore(t testing.TB, opts ...catalog.Option) *catalog.Store {
	t.Helper()
	s, _ := newPoolStore(t, opts...)
	return s
}

// newPoolStore is a store on a database of its own, migrated, and its
// pool.
func newPoolStore(t testing.TB, opts ...catalog.Option) (*catalog.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	if err := migrations.Up(context.Background(), pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	return catalog.NewStore(pool, keys, nil, opts...), pool
}

func register(t testing.TB, s *catalog.Store, name, url string, relist string) *catalog.Broker {
	t.Helper()
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: url, RelistDuration: relist}}
	b.Name = name
	b, err := s.CreateBroker(context.Background(), b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ready(b *catalog.Broker) catalog.Condition {
	c, _ := catalog.FindCondition(b.Status.Conditions, catalog.ConditionReady)
	return c
}

// TestRelistRemovesAndRestores changes a broker's catalogue between
// relists: a plan that disappears is marked removed while an instance
// holds it (its instances keep working, new ones are refused) and comes
// back when the broker offers it again; the order follows the broker's.
func TestRelistRemovesAndRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedFake(t)
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}}
	in.Name = "kept"
	if _, err := s.CreateInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	full := fake.Catalog()
	trimmed := []osbtest.Service{full[0]}                                 // a copy of the service, to change its plans
	trimmed[0].Plans = []osbtest.Plan{full[0].Plans[1], full[0].Plans[0]} // drop two plans, swap the others
	fake.SetCatalog(trimmed)
	got, err := s.Relist(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ServicePlanCount != 2 {
		t.Errorf("plans after the broker dropped two: %d", got.Status.ServicePlanCount)
	}
	plans, err := s.ListPlans(ctx, catalog.PlanFilter{}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans.Items) != 2 || plans.Items[0].Spec.ExternalName != full[0].Plans[1].Name {
		t.Errorf("listed plans do not follow the broker's new order: %v", names(plans.Items))
	}
	all, _ := s.ListPlans(ctx, catalog.PlanFilter{IncludeRemoved: true}, catalog.ListOptions{})
	removed := 0
	for _, p := range all.Items {
		if p.Status.RemovedFromBrokerCatalog {
			removed++
		}
	}
	// The dropped plan with an instance is kept, marked removed; the
	// other, which nothing holds, is deleted (TestRelistDropsUnheld).
	if removed != 1 || len(all.Items) != 3 {
		t.Errorf("%d plans marked removed of %d, want 1 of 3", removed, len(all.Items))
	}
	if _, err := s.GetInstanceByName(ctx, catalog.DefaultNamespace, "kept"); err != nil {
		t.Errorf("the instance of a removed plan is gone: %v", err)
	}
	refused := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}}
	refused.Name = "new"
	_, err = s.CreateInstance(ctx, refused)
	if v, ok := catalog.AsValidation(err); !ok || !strings.Contains(v.Error(), "removed") {
		t.Errorf("a new instance of a removed plan: %v", err)
	}
	fake.SetCatalog(full)
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateInstance(ctx, refused); err != nil {
		t.Errorf("the restored plan refuses instances: %v", err)
	}
}

func names(plans []*catalog.ServicePlan) []string {
	var out []string
	for _, p := range plans {
		out = append(out, p.Spec.ExternalName)
	}
	return out
}

// TestRelistFailures: a broker that is down, answers 500, or answers
// garbage keeps what is stored; its status says why and when the next try
// is, with growing backoff; the relister retries it and it recovers.
func TestRelistFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "flaky", fake.URL(), "1s")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		prepare func()
		says    string
	}{
		{"down", fake.Down, "connect"},
		{"500", func() {
			fake.Up()
			fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Status: 500, Description: "on fire", Times: 1})
		}, "on fire"},
		{"garbage", func() { fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Status: 200, Body: "{not json", Times: 1}) }, "not valid JSON"},
		{"invalid", func() {
			fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Status: 200, Body: `{"services":[{"id":"x","name":"","description":"d","bindable":true,"plans":[]}]}`, Times: 1})
		}, "services[0].name: required"},
	} {
		tc.prepare()
		got, err := s.Relist(ctx, b.ID)
		if err == nil {
			t.Fatalf("%s: relist succeeded", tc.name)
		}
		if c := ready(got); c.Status != catalog.ConditionFalse || c.Reason != catalog.ReasonErrorFetchingCatalog || !strings.Contains(c.Message, tc.says) {
			t.Errorf("%s: condition %+v", tc.name, c)
		}
		if got.Status.ServicePlanCount != 4 {
			t.Errorf("%s: stored plans lost: %d", tc.name, got.Status.ServicePlanCount)
		}
		if got.Status.NextRelistTime == nil || !got.Status.NextRelistTime.After(time.Now()) {
			t.Errorf("%s: no retry scheduled", tc.name)
		}
	}
	plans, _ := s.ListPlans(ctx, catalog.PlanFilter{}, catalog.ListOptions{})
	if len(plans.Items) != 4 {
		t.Errorf("plans after failures: %d", len(plans.Items))
	}
	// The relister, running as it does in the server, recovers the broker.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.RunRelister(rctx, 100*time.Millisecond)
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		got, err := s.GetBroker(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c := ready(got); c.Status != catalog.ConditionTrue {
			return fmt.Errorf("the relister has not recovered the broker: %+v", c)
		}
		return nil
	})
	events, _ := s.Events(ctx, b.ID, 0)
	warnings := 0
	for _, e := range events {
		if e.Type == "Warning" {
			warnings++
		}
	}
	if warnings != 4 {
		t.Errorf("%d warning events, want one per failure", warnings)
	}
}

// TestScheduledRelistClaims runs two relisters (two replicas) against one
// due broker: it is fetched once per due time, not twice. The first fetch
// is slow, so the other relister tries its claim many times while the
// first is in flight; a second fetch it started would have reached the
// broker before the broker turns Ready.
func TestScheduledRelistClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Delay: 500 * time.Millisecond, Times: 1})
	shared := register(t, s, "shared", fake.URL(), "1h")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range 2 {
		go s.RunRelister(rctx, 20*time.Millisecond)
	}
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		got, err := s.GetBroker(ctx, shared.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c := ready(got); c.Status != catalog.ConditionTrue {
			return fmt.Errorf("the shared broker was never fetched: %+v", c)
		}
		return nil
	})
	if n := fake.Count(osbtest.VerbCatalog); n != 1 {
		t.Errorf("the due broker was fetched %d times by two relisters", n)
	}
}

func TestBrokerCredentialsSealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	b := register(t, s, "sealed", "http://127.0.0.1:1", "")
	auth, err := s.BrokerAuth(ctx, b.ID)
	if err != nil || auth.Basic.Password != "p" {
		t.Fatalf("credentials: %+v %v", auth, err)
	}
	raw, _ := json.Marshal(b)
	if strings.Contains(string(raw), `"p"`) {
		t.Errorf("the broker object carries its password: %s", raw)
	}
	if _, err := s.GetBroker(ctx, "nope"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("unknown broker: %v", err)
	}
}

// TestTLSBroker registers a broker served over TLS: with its CA bundle it
// works, without it the fetch fails verification, and with
// insecureSkipTLSVerify it works again.
func TestTLSBroker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithTLS())
	for _, tc := range []struct {
		name     string
		spec     catalog.BrokerSpec
		ok       bool
		mentions string
	}{
		{"with-ca", catalog.BrokerSpec{URL: fake.URL(), CABundle: string(fake.CAPEM())}, true, ""},
		{"without-ca", catalog.BrokerSpec{URL: fake.URL()}, false, "certificate"},
		{"insecure", catalog.BrokerSpec{URL: fake.URL(), InsecureSkipTLSVerify: true}, true, ""},
	} {
		b := &catalog.Broker{Spec: tc.spec}
		b.Name = tc.name
		b, err := s.CreateBroker(ctx, b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Relist(ctx, b.ID)
		if (err == nil) != tc.ok {
			t.Errorf("%s: relist error %v", tc.name, err)
			continue
		}
		if !tc.ok && !strings.Contains(ready(got).Message, tc.mentions) {
			t.Errorf("%s: condition %+v", tc.name, ready(got))
		}
		if tc.ok {
			// Each broker offers the fake's catalogue; only the first may
			// own its ids, so the others are told so rather than merged.
			_ = s.DeleteBroker(ctx, b.ID)
		}
	}
}

// TestBrokerCredentialsInSecret registers a broker whose credentials are
// in a Kubernetes Secret (the Kubernetes API's authInfo.secretRef) in a
// store that cannot read Secrets: it neither claims the broker's relist nor
// fetches it on demand, and leaves its status alone for the engine, which
// reads the Secret (apiserver TestAggregated, with a real cluster).
func TestBrokerCredentialsInSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))

	bad := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL(), AuthInfo: &catalog.BrokerAuthInfo{
		Basic: &catalog.BasicAuthInfo{SecretRef: &catalog.ObjectRef{Name: "creds"}}}}}
	bad.Name = "no-namespace"
	if _, err := s.CreateBroker(ctx, bad, nil); err == nil || !strings.Contains(err.Error(), "spec.authInfo.basic.secretRef.namespace") {
		t.Errorf("a secretRef without namespace: %v", err)
	}
	both := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL(), AuthInfo: &catalog.BrokerAuthInfo{
		Basic:  &catalog.BasicAuthInfo{Username: "u"},
		Bearer: &catalog.BearerAuthInfo{SecretRef: &catalog.ObjectRef{Name: "creds", Namespace: "brokers"}}}}}
	both.Name = "both"
	if _, err := s.CreateBroker(ctx, both, nil); err == nil || !strings.Contains(err.Error(), "spec.authInfo: give basic or bearer") {
		t.Errorf("basic and bearer: %v", err)
	}

	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL(), RelistDuration: "1h", AuthInfo: &catalog.BrokerAuthInfo{
		Basic: &catalog.BasicAuthInfo{Username: "ignored", SecretRef: &catalog.ObjectRef{Name: "creds", Namespace: "brokers"}}}}}
	b.Name = "from-secret"
	b, err := s.CreateBroker(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ref := b.Spec.SecretRef(); ref == nil || ref.Name != "creds" || b.Spec.AuthInfo.Basic.Username != "" {
		t.Fatalf("stored authInfo: %+v", b.Spec.AuthInfo)
	}
	if auth, err := s.BrokerAuth(ctx, b.ID); err != nil || auth != nil {
		t.Errorf("sealed credentials of a broker whose are in a Secret: %+v, %v", auth, err)
	}

	// The broker is due at once; a plain one registered beside it is
	// fetched, this one not.
	plain := register(t, s, "plain", fake.URL(), "1h")
	rctx, cancel := context.WithCancel(ctx)
	go s.RunRelister(rctx, 20*time.Millisecond)
	eventually.Succeeds(t, 10*time.Second, func(ctx context.Context) error {
		got, err := s.GetBroker(ctx, plain.Name)
		if err != nil {
			t.Fatal(err)
		}
		if c := ready(got); c.Status != catalog.ConditionTrue {
			return fmt.Errorf("the plain broker was never fetched: %+v", c)
		}
		return nil
	})
	cancel()
	if n := fake.Count(osbtest.VerbCatalog); n != 1 {
		t.Errorf("the fake broker's catalogue was fetched %d times, want once (for the plain broker)", n)
	}
	if _, err := s.Relist(ctx, b.ID); !errors.Is(err, catalog.ErrUnprocessable) || !strings.Contains(err.Error(), "only the engine reads") {
		t.Errorf("relist without Secrets: %v", err)
	}
	got, err := s.GetBroker(ctx, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 {
		t.Errorf("the broker's status changed: %+v", got.Status.Conditions)
	}

	// Dropping the reference drops the credentials: none are sealed.
	got, err = s.UpdateBroker(ctx, b.ID, 0, func(b *catalog.Broker) (*catalog.BrokerAuth, error) {
		b.Spec.AuthInfo = nil
		return nil, nil
	})
	if err != nil || got.Spec.AuthInfo != nil {
		t.Fatalf("update without authInfo: %v, %+v", err, got.Spec.AuthInfo)
	}
}

// TestPublishEvents: once committed, history entries go to the publisher
// with their object's name.
func TestPublishEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var got []catalog.ObjectEvent
	s := newStore(t, catalog.PublishEventsTo(func(evs []catalog.ObjectEvent) { got = append(got, evs...) }))
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "published", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Reason != catalog.ReasonFetchedCatalog || got[0].Name != "published" ||
		got[0].Kind != catalog.KindBroker || got[0].ObjectID != b.ID {
		t.Fatalf("published: %+v", got)
	}

	// An entry about an object whose status stays as it was (a failure
	// repeated) is published too.
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
	in.Name, in.Namespace = "db", "team"
	in, err := s.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for range 2 {
		if _, err := s.UpdateInstanceStatus(ctx, in.ID, func(*catalog.Instance) error { return nil },
			catalog.EventRecord{Type: "Warning", Reason: "ProvisionCallFailed", Message: "the broker answered 500"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[1].Name != "db" || got[1].Namespace != "team" || got[1].Reason != "ProvisionCallFailed" {
		t.Errorf("published for an unchanged instance: %+v", got)
	}
}

// TestRelistDropsUnheld: a broker that offers its plans under new ids at
// every fetch does not grow the catalog. A removed plan is deleted unless
// an instance names it, a quota limits it or its visibility was set
// (those would be lost with it); a removed class once no plan or instance
// is left. A watcher of the feed is told DELETED.
func TestRelistDropsUnheld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedFake(t)
	full := fake.Catalog()
	plans := full[0].Plans
	if _, err := s.SetPlanVisibility(ctx, plans[1].ID, []string{"team-a"}); err != nil {
		t.Fatal(err)
	}
	first, err := s.ListPlans(ctx, catalog.PlanFilter{IncludeRemoved: true}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev := first.ResourceVersion
	for round := range 5 {
		renamed := []osbtest.Service{full[0]}
		renamed[0].Plans = nil
		for i, p := range plans {
			if i == 1 && round == 0 {
				continue // dropped once, with its visibility set: kept
			}
			p.ID = fmt.Sprintf("%s-%d", p.ID, round)
			renamed[0].Plans = append(renamed[0].Plans, p)
		}
		fake.SetCatalog(renamed)
		if _, err := s.Relist(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListPlans(ctx, catalog.PlanFilter{IncludeRemoved: true}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, p := range all.Items {
		if p.Status.RemovedFromBrokerCatalog {
			removed++
			if p.Spec.ExternalID != plans[1].ID {
				t.Errorf("removed plan %s kept, though nothing holds it", p.Spec.ExternalID)
			}
		}
	}
	if removed != 1 || len(all.Items) != len(plans)+1 {
		t.Errorf("%d plans, %d of them removed, after 5 fetches renaming %d plans; want %d and 1 (the one whose visibility was set)",
			len(all.Items), removed, len(plans), len(plans)+1)
	}
	changes, err := s.Feed().Since(ctx, rev, []string{catalog.KindServicePlan}, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, c := range changes {
		if c.Type == catalog.Deleted {
			deleted++
		}
	}
	if want := 4 * len(plans); deleted < want {
		t.Errorf("the feed told %d plans deleted, want at least %d", deleted, want)
	}
}

// listedFake is a store with a fake broker registered and its catalogue
// fetched.
func listedFake(t *testing.T) (*catalog.Store, *osbtest.Broker, *catalog.Broker) {
	t.Helper()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
	return s, fake, b
}
