package catalog

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Claims: cluster-wide locks on objects, so one engine replica at a time
// works on an object.

// Claimer takes cluster-wide locks on objects, so that one engine replica
// at a time works on an object. Claims are PostgreSQL session advisory
// locks, many to a session: a few connections of its own carry every claim
// the process holds, each key always on the same one. So a claim held
// while a broker takes its time costs no connection, and the number of
// objects in flight is not bounded by the number of connections.
type Claimer struct {
	cfg   *pgx.ConnConfig
	conns []*claimConn
}

// claimConn is one session that holds claims; mu serialises its use.
type claimConn struct {
	mu   sync.Mutex
	conn *pgx.Conn // nil until first used, and after it broke
	// epoch counts the sessions: a claim taken in an earlier one was
	// released when that session ended.
	epoch uint64
}

// claimTimeout bounds the release of a claim, which must not wait for a
// caller that has gone.
const claimTimeout = 10 * time.Second

// NewClaimer makes a claimer over at most n sessions of its own, opened
// when first needed.
func (s *Store) NewClaimer(_ context.Context, n int) (*Claimer, error) {
	c := &Claimer{cfg: s.pool.Config().ConnConfig.Copy(), conns: make([]*claimConn, max(n, 1))}
	for i := range c.conns {
		c.conns[i] = &claimConn{}
	}
	return c, nil
}

// Close ends the claimer's sessions; claims still held are released.
func (c *Claimer) Close() {
	for _, cc := range c.conns {
		cc.mu.Lock()
		cc.drop()
		cc.mu.Unlock()
	}
}

// drop closes the session; cc.mu is held.
func (cc *claimConn) drop() {
	if cc.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	_ = cc.conn.Close(ctx)
	cc.conn = nil
	cc.epoch++
}

// Claim takes the lock on key. ok is false when another process holds it;
// release gives it back.
func (c *Claimer) Claim(ctx context.Context, key string) (release func(), ok bool, err error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	cc := c.conns[h.Sum32()%uint32(len(c.conns))]
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, c.cfg)
		if err != nil {
			return nil, false, mapErr(err)
		}
		cc.conn = conn
	}
	if err := cc.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 7))`, key).Scan(&ok); err != nil {
		// The session may be lost, and its claims with it.
		cc.drop()
		return nil, false, mapErr(err)
	}
	if !ok {
		return nil, false, nil
	}
	epoch := cc.epoch
	return func() {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		if cc.epoch != epoch || cc.conn == nil {
			return // released with its session
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
		defer cancel()
		if _, err := cc.conn.Exec(rctx, `SELECT pg_advisory_unlock(hashtextextended($1, 7))`, key); err != nil {
			// A session whose unlock failed is closed, which releases
			// every claim it held, as a restart of the database does.
			cc.drop()
		}
	}, true, nil
}
