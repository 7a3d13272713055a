package catalog

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrNoSession says a session id is unknown or expired.
var ErrNoSession = errors.New("no such session")

// sessionPrefix marks web session ids, as tokenPrefix marks API tokens.
const sessionPrefix = "bds_"

// Session is a signed-in browser: the role and namespaces of the API token
// it was opened with, read again from the token on every lookup, so a
// revoked token ends its sessions.
type Session struct {
	Role string
	// TokenID and TokenName name the token, for the history of what the
	// session does.
	TokenID, TokenName string
	// Namespaces limits the session to these namespaces, as its token is;
	// empty means all (and cluster-scoped objects, such as brokers).
	Namespaces []string
	Expires    time.Time
}

// AllNamespaces tells whether the session is not limited to namespaces.
func (s Session) AllNamespaces() bool { return len(s.Namespaces) == 0 }

// AllowsNamespace tells whether the session may see and act in namespace ns.
func (s Session) AllowsNamespace(ns string) bool {
	return s.AllNamespaces() || slices.Contains(s.Namespaces, ns)
}

// MaxSessionsPerToken is how many sessions one API token keeps at most:
// signing in once more signs its oldest session out, so a token's holder
// signing in without end (without the last session's cookie) does not
// grow the sessions table for the whole of their lifetime.
const MaxSessionsPerToken = 64

// CreateSession checks an API token and opens a session for it that lasts
// ttl. It returns the session id, the one thing the browser keeps: the
// store holds its SHA-256 and the token's hash, never either in clear.
// Expired sessions are removed on the way, and the token's oldest
// sessions beyond MaxSessionsPerToken.
func (s *Store) CreateSession(ctx context.Context, token string, ttl time.Duration) (string, Session, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return "", Session{}, ErrBadToken
	}
	tokenSum := sha256.Sum256([]byte(token))
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", Session{}, err
	}
	id := sessionPrefix + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(id))
	sess := Session{Expires: s.now().Add(ttl).UTC().Truncate(time.Microsecond)}
	if _, err := s.PruneSessions(ctx); err != nil {
		return "", Session{}, err
	}
	// The token's oldest sessions beyond the bound go in the same
	// statement, which does not see the new one: the newest
	// MaxSessionsPerToken-1 stay beside it.
	err := s.pool.QueryRow(ctx, `WITH opened AS (
			INSERT INTO catalog.web_sessions (hash, token_hash, expires_at)
			SELECT $1, hash, $3 FROM catalog.api_tokens WHERE hash = $2 AND (expires_at IS NULL OR expires_at > $4)
			RETURNING (SELECT role FROM catalog.api_tokens WHERE hash = $2),
				(SELECT coalesce(namespaces, '{}') FROM catalog.api_tokens WHERE hash = $2),
				(SELECT id::text FROM catalog.api_tokens WHERE hash = $2), (SELECT name FROM catalog.api_tokens WHERE hash = $2)),
		oldest AS (
			DELETE FROM catalog.web_sessions WHERE hash IN (SELECT hash FROM catalog.web_sessions
				WHERE token_hash = $2 ORDER BY created_at DESC, expires_at DESC, hash OFFSET $5 - 1))
		SELECT * FROM opened`,
		sum[:], tokenSum[:], sess.Expires, s.now(), MaxSessionsPerToken).Scan(&sess.Role, &sess.Namespaces, &sess.TokenID, &sess.TokenName)
	if err != nil {
		if errors.Is(mapErr(err), ErrNotFound) {
			return "", Session{}, ErrBadToken
		}
		return "", Session{}, fmt.Errorf("open session: %w", mapErr(err))
	}
	if len(sess.Namespaces) == 0 {
		sess.Namespaces = nil
	}
	return id, sess, nil
}

// LookupSession returns the live session of an id, with the current role
// of its token.
func (s *Store) LookupSession(ctx context.Context, id string) (Session, error) {
	if !strings.HasPrefix(id, sessionPrefix) {
		return Session{}, ErrNoSession
	}
	sum := sha256.Sum256([]byte(id))
	var sess Session
	err := s.pool.QueryRow(ctx, `SELECT t.role, coalesce(t.namespaces, '{}'), w.expires_at, t.id::text, t.name FROM catalog.web_sessions w
		JOIN catalog.api_tokens t ON t.hash = w.token_hash
		WHERE w.hash = $1 AND w.expires_at > $2 AND (t.expires_at IS NULL OR t.expires_at > $2)`, sum[:], s.now()).Scan(&sess.Role, &sess.Namespaces, &sess.Expires, &sess.TokenID, &sess.TokenName)
	if err != nil {
		if errors.Is(mapErr(err), ErrNotFound) {
			return Session{}, ErrNoSession
		}
		return Session{}, fmt.Errorf("read session: %w", mapErr(err))
	}
	if len(sess.Namespaces) == 0 {
		sess.Namespaces = nil
	}
	return sess, nil
}

// DeleteSession ends a session (signing out); an unknown id is no error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	sum := sha256.Sum256([]byte(id))
	if _, err := s.pool.Exec(ctx, `DELETE FROM catalog.web_sessions WHERE hash = $1`, sum[:]); err != nil {
		return fmt.Errorf("end session: %w", mapErr(err))
	}
	return nil
}

// PruneSessions removes expired sessions and says how many.
func (s *Store) PruneSessions(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM catalog.web_sessions WHERE expires_at <= $1`, s.now())
	if err != nil {
		return 0, fmt.Errorf("prune sessions: %w", mapErr(err))
	}
	return tag.RowsAffected(), nil
}
