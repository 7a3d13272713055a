package catalog

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Claims: cluster-wide ownership of objects, so one engine replica at a
// time works on an object.
//
// Objects' keys hash into ClaimShards shards, and a process works on an
// object only while it owns the object's shard: a PostgreSQL session
// advisory lock, held on a session of the claimer's own for as long as
// the process lives. A shard is taken the first time the process needs
// it and nobody holds it; one another replica holds is refused, and tried
// again by Probe, which takes it over once its owner is gone (its session
// ended with it). So working on an object costs no round trip, a claim
// held while a broker takes its time costs no connection, and the number
// of objects in flight is not bounded by the number of connections.
//
// Engines of releases before shards claimed each object on its own
// (pg_try_advisory_lock(hashtextextended(key, 7)) around each reconcile).
// Once Probe has seen such a lock held by a session that holds no shard,
// and for legacyLinger after it last did, a claimer takes that per-object
// lock too, so that replicas of both releases keep out of each other's
// way during a rolling update. An earlier-release engine that claimed
// nothing while it was looked at is not seen.

// errClaimsLost: the claimer's session ended while an object was being
// claimed (it is claimed again later).
var errClaimsLost = errors.New("the claims' session was lost")

// ClaimShards is how many shards objects' keys hash into.
const ClaimShards = 64

// claimLockSpace is the first key of the session advisory lock that holds
// a shard, the second being the shard.
const claimLockSpace = 1650749050

// claimTimeout bounds the claimer's round trips, which must not wait for
// a caller that has gone.
const claimTimeout = 10 * time.Second

type shardState uint8

const (
	shardFree    shardState = iota // not tried since the session began
	shardOwned                     // held by this process's session
	shardRefused                   // another session held it when tried
)

// Claimer holds the shards of one process.
type Claimer struct {
	cfg *pgx.ConnConfig
	// session serialises the use of conn.
	session sync.Mutex
	conn    *pgx.Conn // nil until first used, and after it broke

	mu     sync.Mutex
	shards [ClaimShards]shardState
	// legacy: a process of an earlier release may claim objects one by
	// one; per-object claims are taken too, until legacyUntil.
	legacy      bool
	legacyUntil time.Time
	linger      time.Duration // legacyLinger, but in tests
	timeout     time.Duration // claimTimeout, but in tests
}

// legacyLinger is how long per-object claims are still taken after a
// probe last saw one of an earlier release: such an engine holds its
// claims only while it reconciles, and a probe sees it only then.
const legacyLinger = 10 * time.Minute

// NewClaimer makes a claimer over a session of its own, opened when first
// needed.
func (s *Store) NewClaimer(context.Context) (*Claimer, error) {
	return &Claimer{cfg: s.pool.Config().ConnConfig.Copy(), linger: legacyLinger, timeout: claimTimeout}, nil
}

// ClaimShard is the shard key hashes into.
func ClaimShard(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % ClaimShards)
}

// Close ends the claimer's session: its shards are released.
func (c *Claimer) Close() {
	c.session.Lock()
	defer c.session.Unlock()
	if c.conn != nil {
		// Given back before the session ends: PostgreSQL lets a
		// closed session's locks go only once its backend has exited,
		// which closing the connection does not wait for, so another
		// engine probing at once could still find them held.
		ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
		_, _ = c.conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
		cancel()
	}
	c.drop()
}

// drop closes the session, whose shards are released with it; c.session
// is held.
func (c *Claimer) drop() {
	if c.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
		_ = c.conn.Close(ctx)
		cancel()
		c.conn = nil
	}
	c.mu.Lock()
	for i, st := range c.shards {
		if st == shardOwned {
			c.shards[i] = shardFree
		}
	}
	c.mu.Unlock()
}

// connect opens the session if it is not open; c.session is held.
func (c *Claimer) connect(ctx context.Context) error {
	if c.conn != nil {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, c.cfg)
	if err != nil {
		return mapErr(err)
	}
	c.conn = conn
	return nil
}

// Claim reports whether this process may work on key now: it owns the
// key's shard (taken now if nobody held it). ok is false when another
// process owns the shard: that one works on key. release, when ok, ends
// the work (it gives back the per-object claim a claimer takes beside an
// earlier release's engines; otherwise it does nothing).
func (c *Claimer) Claim(ctx context.Context, key string) (release func(), ok bool, err error) {
	shard := ClaimShard(key)
	c.mu.Lock()
	st, legacy := c.shards[shard], c.legacy
	c.mu.Unlock()
	switch st {
	case shardRefused:
		return nil, false, nil
	case shardFree:
		if ok, err := c.take(ctx, shard); err != nil || !ok {
			return nil, false, err
		}
	}
	if !legacy {
		return func() {}, true, nil
	}
	return c.claimObject(ctx, key)
}

// take tries to take shard for this process.
func (c *Claimer) take(ctx context.Context, shard int) (bool, error) {
	c.session.Lock()
	defer c.session.Unlock()
	c.mu.Lock()
	st := c.shards[shard]
	c.mu.Unlock()
	if st != shardFree {
		return st == shardOwned, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.connect(ctx); err != nil {
		return false, err
	}
	var ok bool
	if err := c.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, claimLockSpace, shard).Scan(&ok); err != nil {
		c.drop() // the session may be lost, and its shards with it
		return false, mapErr(err)
	}
	c.mu.Lock()
	c.shards[shard] = shardRefused
	if ok {
		c.shards[shard] = shardOwned
	}
	c.mu.Unlock()
	return ok, nil
}

// claimObject takes the per-object claim of an earlier release on key,
// on the claimer's session.
func (c *Claimer) claimObject(ctx context.Context, key string) (func(), bool, error) {
	c.session.Lock()
	defer c.session.Unlock()
	if c.conn == nil {
		return nil, false, errClaimsLost
	}
	qctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var ok bool
	if err := c.conn.QueryRow(qctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 7))`, key).Scan(&ok); err != nil {
		c.drop()
		return nil, false, mapErr(err)
	}
	if !ok {
		return nil, false, nil
	}
	conn := c.conn
	return func() {
		c.session.Lock()
		defer c.session.Unlock()
		if c.conn != conn {
			return // released with its session
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		if _, err := c.conn.Exec(rctx, `SELECT pg_advisory_unlock(hashtextextended($1, 7))`, key); err != nil {
			c.drop()
		}
	}, true, nil
}

// Probe checks the claimer's session (a lost one has lost its shards:
// they are taken again as they are needed), tries again the shards
// another process held, and looks for engines of an earlier release. It
// returns the shards it took: their former owner is gone, and what it
// had to do is this process's now.
func (c *Claimer) Probe(ctx context.Context) (taken []int, err error) {
	c.session.Lock()
	defer c.session.Unlock()
	// A session whose peer went silent (a failover's old primary) would
	// hold the probe for as long as TCP waits, while Claim still answered
	// yes for shards another replica may have taken on the new primary:
	// the probe fails, and drops the session, within c.timeout instead.
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	var refused []int32
	c.mu.Lock()
	for i, st := range c.shards {
		if st == shardRefused {
			refused = append(refused, int32(i))
		}
	}
	c.mu.Unlock()
	// Advisory locks in the per-object claims' key space held by sessions
	// that hold no shard: an earlier release's engine (or, for a moment,
	// a feed pruning round, which is harmless).
	var got []int32
	var legacy bool
	if err := c.conn.QueryRow(ctx, `SELECT
			coalesce((SELECT array_agg(s) FROM unnest($2::int[]) s WHERE pg_try_advisory_lock($1, s)), '{}'),
			EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid <> pg_backend_pid()
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
				AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objsubid = 2))`,
		claimLockSpace, refused).Scan(&got, &legacy); err != nil {
		c.drop()
		return nil, mapErr(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if legacy {
		c.legacyUntil = time.Now().Add(c.linger)
	}
	c.legacy = time.Now().Before(c.legacyUntil)
	for _, s := range got {
		c.shards[s] = shardOwned
		taken = append(taken, int(s))
	}
	return taken, nil
}
