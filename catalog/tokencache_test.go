package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// TestTokenCache: a listening cache answers for a token it checked without
// the database (a row removed behind its back, its announcement
// suppressed, is still answered for), forgets every token when any is
// removed (a revocation takes effect on a cache that trusts for an hour),
// honours expiry itself, and keeps nothing while it does not listen.
func TestTokenCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	s := NewStore(pool, nil, nil)
	clock := time.Now()
	s.now = func() time.Time { return clock }
	issue := func(req TokenRequest) (string, *Token) {
		t.Helper()
		tok, rec, err := s.IssueToken(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return tok, rec
	}
	// removeSilently deletes a token without announcing it, as if the
	// announcement were lost.
	removeSilently := func(id string) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // committed below
		for _, q := range []string{`ALTER TABLE catalog.api_tokens DISABLE TRIGGER api_tokens_removed`,
			`DELETE FROM catalog.api_tokens WHERE id = '` + id + `'`,
			`ALTER TABLE catalog.api_tokens ENABLE TRIGGER api_tokens_removed`} {
			if _, err := tx.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}

	c := s.NewTokenCache(time.Hour)
	deaf, deafRec := issue(TokenRequest{Role: RoleViewer})
	if _, err := c.Lookup(ctx, deaf); err != nil {
		t.Fatal(err)
	}
	removeSilently(deafRec.ID)
	if _, err := c.Lookup(ctx, deaf); !errors.Is(err, ErrBadToken) {
		t.Errorf("a cache that does not listen answered for a removed token: %v", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		if !c.Listening() {
			return errors.New("the cache does not listen yet")
		}
		return nil
	})

	kept, keptRec := issue(TokenRequest{Role: RoleDeveloper, Namespaces: []string{"team-a"}})
	if got, err := c.Lookup(ctx, kept); err != nil || got.Role != RoleDeveloper || !got.AllowsNamespace("team-a") || got.AllowsNamespace("team-b") {
		t.Fatalf("lookup: %+v, %v", got, err)
	}
	removeSilently(keptRec.ID)
	if _, err := s.LookupToken(ctx, kept); !errors.Is(err, ErrBadToken) {
		t.Fatalf("the database still has the token: %v", err)
	}
	if got, err := c.Lookup(ctx, kept); err != nil || got.ID != keptRec.ID {
		t.Errorf("a kept token was not answered from the cache: %+v, %v", got, err)
	}
	if _, err := c.Lookup(ctx, kept+"x"); !errors.Is(err, ErrBadToken) {
		t.Errorf("another token: %v", err)
	}

	// Any removal is announced, and the cache forgets every token.
	revoked, revokedRec := issue(TokenRequest{Name: "ci", Role: RoleAdmin})
	if _, err := c.Lookup(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, revokedRec.Name); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		if _, err := c.Lookup(ctx, revoked); !errors.Is(err, ErrBadToken) {
			return errors.New("the revoked token still works")
		}
		return nil
	})
	if _, err := c.Lookup(ctx, kept); !errors.Is(err, ErrBadToken) {
		t.Errorf("the token removed unannounced outlived a revocation: %v", err)
	}

	// Expiry is the cache's to honour: no announcement marks it.
	at := clock.Add(time.Minute)
	expiring, _ := issue(TokenRequest{Role: RoleViewer, ExpiresAt: &at})
	if _, err := c.Lookup(ctx, expiring); err != nil {
		t.Fatal(err)
	}
	clock = at
	if _, err := c.Lookup(ctx, expiring); !errors.Is(err, ErrBadToken) {
		t.Errorf("an expired token kept by the cache: %v", err)
	}
}
