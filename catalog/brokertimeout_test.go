package catalog_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// silentBroker accepts connections and never answers, like a hung broker.
func silentBroker(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// TestRelistOfHungBroker: a broker that never answers fails the fetch at
// the broker timeout with a status that says so, and a fetch cancelled by a
// shutdown still leaves the broker a status and a next attempt.
func TestRelistOfHungBroker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	s := catalog.NewStore(pool, keys, nil, catalog.WithBrokerTimeout(200*time.Millisecond))
	url := silentBroker(t)

	b := register(t, s, "hung", url, "")
	if _, err := s.Relist(ctx, b.ID); err == nil {
		t.Fatal("relist of a broker that never answers succeeded")
	}
	got, err := s.GetBroker(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := ready(got); c.Reason != catalog.ReasonErrorFetchingCatalog || !strings.Contains(c.Message, "did not answer within 200ms") || got.Status.NextRelistTime == nil {
		t.Fatalf("after the timeout: %+v next=%v", c, got.Status.NextRelistTime)
	}

	// With the default timeout (10 s) the cancellation comes first.
	s2 := catalog.NewStore(pool, keys, nil)
	b2 := register(t, s2, "hung2", url, "")
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	// The caller gets the error and the broker as recorded, to answer with.
	recorded, err := s2.Relist(cctx, b2.ID)
	if err == nil {
		t.Fatal("a cancelled relist succeeded")
	}
	if recorded == nil || !strings.Contains(ready(recorded).Message, "cancelled") {
		t.Fatalf("a cancelled relist returned %+v, want the broker with its new status", recorded)
	}
	got, err = s.GetBroker(ctx, b2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := ready(got); c.Reason != catalog.ReasonErrorFetchingCatalog || !strings.Contains(c.Message, "cancelled") || got.Status.NextRelistTime == nil {
		t.Fatalf("after a cancelled fetch: %+v next=%v", c, got.Status.NextRelistTime)
	}
}
