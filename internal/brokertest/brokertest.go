// Package brokertest runs Bindery's own OSB broker — broker/ with the real
// PostgreSQL driver, creating real databases and roles — for one test, over
// HTTP on a loopback port. Tests of the catalog, the engine and the
// Kubernetes API use it wherever a well-behaved broker is needed;
// internal/osbtest is for brokers that misbehave.
package brokertest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// Start runs the broker with its default catalogue (service postgresql)
// on pool, whose broker schema must be migrated, accepting basic auth as
// username and password; instances are databases of the test's PostgreSQL
// server. It returns the broker's URL. The broker and its job workers stop
// when t ends.
func Start(t testing.TB, pool *pgxpool.Pool, keys *keyring.Keyring, username, password string) string {
	t.Helper()
	ctx := context.Background()
	drv, err := postgresql.New(ctx, pgtest.AdminURL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Close)
	cat, err := broker.DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(ctx, broker.Config{Pool: pool, Catalog: cat, Drivers: map[string]broker.Driver{"postgresql": drv},
		Keys: keys, Auth: broker.Auth{Username: username, Password: password}})
	if err != nil {
		t.Fatal(err)
	}
	// The job workers run asynchronous operations and the safety jobs of
	// synchronous ones.
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Logf("brokertest: stop the broker: %v", err)
		}
	})
	return srv.URL
}
