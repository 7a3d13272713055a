package catalog

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Roles of API tokens. They are cumulative: a developer can do what a
// viewer can, an admin what a developer can.
const (
	RoleViewer    = "viewer"
	RoleDeveloper = "developer"
	RoleAdmin     = "admin"
)

var roleRank = map[string]int{RoleViewer: 1, RoleDeveloper: 2, RoleAdmin: 3}

// Allows reports whether role includes the rights of want.
func Allows(role, want string) bool { return roleRank[role] >= roleRank[want] && roleRank[want] > 0 }

// tokenPrefix marks Bindery API tokens, so that a leaked one is recognisable.
const tokenPrefix = "bdy_"

// ErrBadToken says a token is unknown.
var ErrBadToken = errors.New("unknown API token")

// CreateToken makes a new API token with a role and returns it; only its
// SHA-256 is stored, so it is shown this once.
func (s *Store) CreateToken(ctx context.Context, role string) (string, error) {
	if roleRank[role] == 0 {
		return "", invalid(FieldError{"role", "must be viewer, developer or admin"})
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	if _, err := s.pool.Exec(ctx, `INSERT INTO catalog.api_tokens (id, hash, role) VALUES ($1, $2, $3)`, uuid.NewString(), sum[:], role); err != nil {
		return "", fmt.Errorf("store token: %w", mapErr(err))
	}
	return token, nil
}

// TokenCache remembers recent token lookups for a short while, so a busy
// client costs one hash per request rather than a query.
type TokenCache struct {
	store *Store
	ttl   time.Duration
	mu    sync.Mutex
	m     map[[32]byte]cachedRole
}

type cachedRole struct {
	role    string
	expires time.Time
}

// NewTokenCache returns a cache over the store's tokens; a revoked token
// stops working within ttl.
func (s *Store) NewTokenCache(ttl time.Duration) *TokenCache {
	return &TokenCache{store: s, ttl: ttl, m: map[[32]byte]cachedRole{}}
}

// Role returns the role of a token. The token is hashed first; lookups are
// by the hash, which says nothing about the token.
func (c *TokenCache) Role(ctx context.Context, token string) (string, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return "", ErrBadToken
	}
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	c.mu.Lock()
	if r, ok := c.m[sum]; ok && now.Before(r.expires) {
		c.mu.Unlock()
		return r.role, nil
	}
	c.mu.Unlock()
	var role string
	err := c.store.pool.QueryRow(ctx, `SELECT role FROM catalog.api_tokens WHERE hash = $1`, sum[:]).Scan(&role)
	if err != nil {
		if errors.Is(mapErr(err), ErrNotFound) {
			return "", ErrBadToken
		}
		return "", mapErr(err)
	}
	c.mu.Lock()
	if len(c.m) > 10000 {
		clear(c.m)
	}
	c.m[sum] = cachedRole{role: role, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return role, nil
}
