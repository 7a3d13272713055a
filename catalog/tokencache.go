package catalog

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// TokensChannel is the PostgreSQL channel on which the removal of any API
// token is announced (a trigger on catalog.api_tokens), however it was
// removed.
const TokensChannel = "bindery_tokens"

// DefaultTokenTTL is how long a TokenCache trusts a token it checked:
// what bounds a revocation's delay should its announcement be lost.
const DefaultTokenTTL = 10 * time.Second

// maxCachedTokens bounds a TokenCache; past it, it starts afresh.
const maxCachedTokens = 10000

// TokenCache checks API tokens as LookupToken does, keeping those it found
// for a short while so that a server checks each token in PostgreSQL once
// per TTL instead of once per request. It keeps no token, only their
// SHA-256, as the database does.
//
// A token stays revocable: the cache trusts what it keeps only while it
// listens on TokensChannel (Run), and forgets everything each time a token
// is removed anywhere, so a revocation takes effect on every replica as
// soon as its announcement arrives, and within the TTL should the
// announcement be lost. A cache that does not listen checks every request
// in the database, as LookupToken does.
type TokenCache struct {
	s   *Store
	ttl time.Duration

	mu sync.Mutex
	// live: Run listens, so what is kept is forgotten when a token is
	// removed.
	live bool
	// epoch counts the times everything was forgotten: a read begun before
	// is not kept after.
	epoch   uint64
	entries map[[sha256.Size]byte]cachedToken
}

type cachedToken struct {
	sum   [sha256.Size]byte
	token *Token
	until time.Time
}

// NewTokenCache returns a cache of the store's tokens that trusts a token
// it checked for ttl (DefaultTokenTTL when not positive). It keeps nothing
// until Run listens.
func (s *Store) NewTokenCache(ttl time.Duration) *TokenCache {
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	return &TokenCache{s: s, ttl: ttl}
}

// ForAllNamespaces tells whether token is a live token for all namespaces
// (of any role).
func (c *TokenCache) ForAllNamespaces(ctx context.Context, token string) bool {
	t, err := c.Lookup(ctx, token)
	return err == nil && t.AllNamespaces()
}

// Lookup returns the live token a bearer token is, as LookupToken does:
// unknown, revoked and expired tokens are ErrBadToken. The Token is
// shared: never change it.
func (c *TokenCache) Lookup(ctx context.Context, token string) (*Token, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return nil, ErrBadToken
	}
	sum := sha256.Sum256([]byte(token))
	now := c.s.now()
	c.mu.Lock()
	e, ok := c.entries[sum]
	live, epoch := c.live, c.epoch
	c.mu.Unlock()
	// The map finds the entry by the token's hash, as the database's index
	// does; the hashes are then compared in constant time all the same.
	if live && ok && now.Before(e.until) && subtle.ConstantTimeCompare(e.sum[:], sum[:]) == 1 {
		if e.token.ExpiresAt != nil && !e.token.ExpiresAt.After(now) {
			return nil, ErrBadToken
		}
		return e.token, nil
	}
	t, err := c.s.lookupTokenSum(ctx, sum[:])
	if err != nil || !live {
		return t, err
	}
	c.mu.Lock()
	if c.live && c.epoch == epoch {
		if len(c.entries) >= maxCachedTokens || c.entries == nil {
			c.entries = map[[sha256.Size]byte]cachedToken{}
		}
		c.entries[sum] = cachedToken{sum: sum, token: t, until: now.Add(c.ttl)}
	}
	c.mu.Unlock()
	return t, nil
}

// Listening tells whether Run listens for removals, and so whether the
// cache keeps the tokens it checks.
func (c *TokenCache) Listening() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// Forget forgets every token kept: a token was removed. Run calls it when
// a removal is announced; a server that removed one calls it at once, so
// that its own next request does not wait for the announcement.
func (c *TokenCache) Forget() {
	c.mu.Lock()
	c.epoch++
	c.entries = nil
	c.mu.Unlock()
}

// setLive says whether removals are being heard; everything kept is
// forgotten either way: what was kept while deaf may have been removed.
func (c *TokenCache) setLive(live bool) {
	c.mu.Lock()
	c.live = live
	c.epoch++
	c.entries = nil
	c.mu.Unlock()
}

// Run listens for token removals on a connection of its own until ctx
// ends, the cache trusting what it keeps only meanwhile. A failed
// connection is tried again with backoff and jitter; until it is back,
// every token is checked in the database.
func (c *TokenCache) Run(ctx context.Context) {
	retry := followRetry
	for {
		err := c.listen(ctx, func() { retry = followRetry })
		c.setLive(false)
		if ctx.Err() != nil {
			return
		}
		d := retry.Step()
		c.s.log.WarnContext(ctx, "listen for API token removals; checking every token in the database meanwhile", "after", d, "error", err)
		if !sleep(ctx, d) {
			return
		}
	}
}

// listen is one connection's worth of Run; ok is called once it listens.
func (c *TokenCache) listen(ctx context.Context, ok func()) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, err := pgx.ConnectConfig(cctx, c.s.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closing: nothing to do about it
	if _, err := conn.Exec(ctx, "LISTEN "+TokensChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	c.setLive(true)
	ok()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for a notification: %w", err)
		}
		c.Forget()
	}
}
