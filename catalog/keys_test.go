package catalog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// TestCheckKeys: a store whose keys are valid but wrong refuses them, also
// on a database sealed before the canary existed; the rotated list (new key
// first, the old one kept) is accepted.
func TestCheckKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	orig, other := keyring.Generate(), keyring.Generate()
	store := func(keys string) *catalog.Store {
		k, err := keyring.Parse(keys)
		if err != nil {
			t.Fatal(err)
		}
		return catalog.NewStore(pool, k, nil)
	}
	s := store(orig)
	if err := s.CheckKeys(ctx); err != nil {
		t.Fatalf("first start: %v", err)
	}
	check := func(name, keys string, ok bool) {
		t.Helper()
		err := store(keys).CheckKeys(ctx)
		if ok != (err == nil) || (err != nil && !errors.Is(err, keyring.ErrWrongKeys)) {
			t.Errorf("%s: %v, want ok=%v", name, err, ok)
		}
	}
	check("wrong key", other, false)
	check("rotated", other+","+orig, true)

	// A database from before the canary: a sealed credential decides.
	if _, err := pool.Exec(ctx, `DELETE FROM catalog.key_canary`); err != nil {
		t.Fatal(err)
	}
	seedSealedCredential(t, s)
	check("wrong key, no canary", other, false)
	check("right key, no canary", orig, true)
}

// seedSealedCredential stores a binding with sealed credentials through s.
func seedSealedCredential(t *testing.T, s *catalog.Store) {
	t.Helper()
	ctx := context.Background()
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}}
	in.Name, in.Namespace = "db", "ns"
	in, err := s.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	bnd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: in.Name}}}
	bnd.Name, bnd.Namespace = "app", "ns"
	bnd, err = s.CreateBinding(ctx, bnd)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetCredentials(ctx, bnd.ID, map[string]any{"password": "pw"}); err != nil {
		t.Fatal(err)
	}
}

// TestReseal: after a rotation (new key first, the old one after it),
// Reseal seals the brokers' and bindings' credentials and the canary with
// the new key, so that a store with the new key alone starts and reads
// them; run again it finds nothing to do, and keys that cannot open a
// value make it fail naming the key it needs.
func TestReseal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	oldKey, newKey := keyring.Generate(), keyring.Generate()
	store := func(keys string) *catalog.Store {
		k, err := keyring.Parse(keys)
		if err != nil {
			t.Fatal(err)
		}
		return catalog.NewStore(pool, k, nil)
	}
	s := store(oldKey)
	if err := s.CheckKeys(ctx); err != nil {
		t.Fatal(err)
	}
	seedSealedCredential(t, s)
	var bindingID, brokerID string
	if err := pool.QueryRow(ctx, `SELECT (SELECT binding_id::text FROM catalog.binding_credentials), (SELECT id::text FROM catalog.brokers)`).Scan(&bindingID, &brokerID); err != nil {
		t.Fatal(err)
	}
	if n, err := store(newKey + "," + oldKey).Reseal(ctx); err != nil || n != 2 {
		t.Fatalf("re-sealed %d values (%v), want the broker's and the binding's", n, err)
	}
	s = store(newKey)
	if err := s.CheckKeys(ctx); err != nil {
		t.Fatalf("the new key alone after re-sealing: %v", err)
	}
	if creds, err := s.Credentials(ctx, bindingID); err != nil || creds["password"] != "pw" {
		t.Fatalf("credentials with the new key alone: %v (%v)", creds, err)
	}
	if auth, err := s.BrokerAuth(ctx, brokerID); err != nil || auth == nil {
		t.Fatalf("broker credentials with the new key alone: %v (%v)", auth, err)
	}
	if n, err := store(newKey + "," + oldKey).Reseal(ctx); err != nil || n != 0 {
		t.Fatalf("again: re-sealed %d values (%v), want none", n, err)
	}
	if _, err := store(keyring.Generate()).Reseal(ctx); !errors.Is(err, keyring.ErrWrongKeys) {
		t.Fatalf("keys that cannot open the values: %v", err)
	}
}
