package controller

import (
	"context"
	"log/slog"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// TestKeyOfAnotherNamespaceNamesNothing: a key whose namespace is not its
// object's (a Secret's label copied into another namespace names a
// binding so) reconciles nothing; the object's own key does.
func TestKeyOfAnotherNamespaceNamesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	for _, s := range migrations.Schemas() {
		if err := migrations.Up(ctx, pool, s); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := keyring.Parse(keyring.Generate())
	store := catalog.NewStore(pool, keys, slog.New(slog.DiscardHandler))
	c, err := New(Config{Store: store, Workers: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "none", ClusterServicePlanExternalName: "none"}}
	in.Name, in.Namespace = "db", "team"
	if in, err = store.CreateInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	written := func(key objectKey) bool {
		t.Helper()
		if _, err := c.reconcile(ctx, key); err != nil {
			t.Fatal(err)
		}
		now, err := store.GetInstance(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		return now.ResourceVersion != in.ResourceVersion
	}
	if written(instanceKey("other", in.ID)) {
		t.Fatal("a key of another namespace reconciled the instance")
	}
	// Its class does not exist: its own key says so in its status.
	if !written(instanceKey("team", in.ID)) {
		t.Fatal("the instance's own key did not reconcile it")
	}
}
