package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

func TestSessions(t *testing.T) {
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	tok, err := s.CreateToken(ctx, catalog.RoleDeveloper)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateSession(ctx, tok+"x", time.Hour); !errors.Is(err, catalog.ErrBadToken) {
		t.Fatalf("unknown token: %v, want ErrBadToken", err)
	}
	id, sess, err := s.CreateSession(ctx, tok, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Role != catalog.RoleDeveloper || id == tok {
		t.Fatalf("session %+v id %q", sess, id)
	}
	// The row holds neither the id nor the token.
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.web_sessions WHERE position($1::bytea in hash) > 0 OR position($2::bytea in token_hash) > 0`, []byte(id), []byte(tok)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("clear id or token stored: %d %v", n, err)
	}
	got, err := s.LookupSession(ctx, id)
	if err != nil || got.Role != catalog.RoleDeveloper {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	if _, err := s.LookupSession(ctx, tok); !errors.Is(err, catalog.ErrNoSession) {
		t.Fatalf("the token is no session id: %v", err)
	}
	if err := s.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupSession(ctx, id); !errors.Is(err, catalog.ErrNoSession) {
		t.Fatalf("after sign-out: %v", err)
	}

	// Expired sessions are refused, then pruned.
	short, _, err := s.CreateSession(ctx, tok, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := s.LookupSession(ctx, short); !errors.Is(err, catalog.ErrNoSession) {
		t.Fatalf("expired: %v", err)
	}
	if pruned, err := s.PruneSessions(ctx); err != nil || pruned != 1 {
		t.Fatalf("pruned %d, %v", pruned, err)
	}

	// Revoking the token ends its sessions.
	live, _, err := s.CreateSession(ctx, tok, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM catalog.api_tokens`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupSession(ctx, live); !errors.Is(err, catalog.ErrNoSession) {
		t.Fatalf("after revocation: %v", err)
	}

	// An expired token opens no session and ends the ones it opened.
	tok2, err := s.CreateToken(ctx, catalog.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	open, _, err := s.CreateSession(ctx, tok2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE catalog.api_tokens SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupSession(ctx, open); !errors.Is(err, catalog.ErrNoSession) {
		t.Fatalf("session of an expired token: %v", err)
	}
	if _, _, err := s.CreateSession(ctx, tok2, time.Hour); !errors.Is(err, catalog.ErrBadToken) {
		t.Fatalf("sign-in with an expired token: %v, want ErrBadToken", err)
	}
}

// TestSessionNamespaces: a session is limited to its token's namespaces,
// read from the token on every lookup.
func TestSessionNamespaces(t *testing.T) {
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	tok, _, err := s.IssueToken(ctx, catalog.TokenRequest{Role: catalog.RoleDeveloper, Namespaces: []string{"team-b", "team-a"}})
	if err != nil {
		t.Fatal(err)
	}
	id, sess, err := s.CreateSession(ctx, tok, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if sess.AllNamespaces() || !sess.AllowsNamespace("team-a") || sess.AllowsNamespace("default") {
		t.Fatalf("new session %+v", sess)
	}
	got, err := s.LookupSession(ctx, id)
	if err != nil || len(got.Namespaces) != 2 || !got.AllowsNamespace("team-b") || got.AllowsNamespace("team-c") {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	// The token's limits are read again: widened to all namespaces, the
	// session follows.
	if _, err := pool.Exec(ctx, `UPDATE catalog.api_tokens SET namespaces = NULL`); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LookupSession(ctx, id); err != nil || !got.AllNamespaces() || got.Namespaces != nil {
		t.Fatalf("after widening: %+v %v", got, err)
	}
	all, err := s.CreateToken(ctx, catalog.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if _, sess, err := s.CreateSession(ctx, all, time.Hour); err != nil || !sess.AllNamespaces() {
		t.Fatalf("session of an unlimited token: %+v %v", sess, err)
	}
}

// TestSessionsBoundedPerToken: signing in again and again with one token
// (each sign-in from a browser without the last one's cookie) keeps at
// most MaxSessionsPerToken sessions of it, signing the oldest out; another
// token's sessions are not touched.
func TestSessionsBoundedPerToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	tok, err := s.CreateToken(ctx, catalog.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateToken(ctx, catalog.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := s.CreateSession(ctx, other, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const limit = catalog.MaxSessionsPerToken
	var ids []string
	for range 3 * limit {
		id, _, err := s.CreateSession(ctx, tok, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.web_sessions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != limit+1 {
		t.Errorf("%d sessions after %d sign-ins with one token and one with another; want %d", n, 3*limit, limit+1)
	}
	if _, err := s.LookupSession(ctx, ids[0]); !errors.Is(err, catalog.ErrNoSession) {
		t.Errorf("the oldest session: %v, want ErrNoSession", err)
	}
	for _, id := range append(ids[len(ids)-limit:], kept) {
		if _, err := s.LookupSession(ctx, id); err != nil {
			t.Fatalf("a session among the newest: %v", err)
		}
	}
}
