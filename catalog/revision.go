package catalog

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Revisions. Every write takes a revision from the catalog.revisions
// sequence in its last round trip, once it holds every row it changes,
// and commits without waiting for other writes; PostgreSQL flushes
// concurrent commits together. Revisions are then taken in the order of
// conflicting writes, but a revision may commit after a higher one: the
// feed is read up to a watermark below which every revision is final
// (committed, or never to be), so that a reader never moves past a change
// still in flight, and hands out changes in revision order.
//
// What tells a reader which revisions may still be in flight is a lock: a
// write takes catalog.revision (the table of the counter revisions came
// from before) in ROW EXCLUSIVE mode before it takes its revision, and
// holds it until it commits. Reading the sequence's last value L, then the
// lock's holders H: every revision up to L not yet committed belongs to
// one of H. Once every write of H has ended, every revision up to L is
// final. A reader keeps the (L, H) of its last reads and moves its
// watermark to the highest L whose H has ended; a read that finds no
// holder moves it to L at once.
//
// A list needs a snapshot that holds every change up to its revision and
// none after it: it takes the lock in SHARE mode, which waits for the
// writes in their last round trip and holds back new ones, takes its
// snapshot and lets go of the lock at once (snapshot.go).

// horizonSQL reads, in this order and each with a snapshot of its own,
// the last revision handed out and the writes that may hold one not yet
// committed (their virtual transaction ids).
var horizonSQL = [2]string{
	`SELECT last_value FROM catalog.revisions`,
	`SELECT coalesce(array_agg(virtualtransaction), '{}') FROM pg_locks
		WHERE locktype = 'relation' AND relation = 'catalog.revision'::regclass AND mode = 'RowExclusiveLock' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
}

// horizon is what one read of horizonSQL found.
type horizon struct {
	last    int64
	holders []string
}

// readHorizon reads the last revision handed out and the writes that may
// still hold one, in one round trip.
func readHorizon(ctx context.Context, q interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}) (horizon, error) {
	var h horizon
	b := &pgx.Batch{}
	b.Queue(horizonSQL[0])
	b.Queue(horizonSQL[1])
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if err := br.QueryRow().Scan(&h.last); err != nil {
		return h, fmt.Errorf("read the last revision: %w", mapErr(err))
	}
	if err := br.QueryRow().Scan(&h.holders); err != nil {
		return h, fmt.Errorf("read the writes in flight: %w", mapErr(err))
	}
	return h, nil
}

// watermark follows, for one reader, the highest revision below which
// every revision is final.
type watermark struct {
	// pending are the horizons of earlier reads whose writes had not all
	// ended, oldest first.
	pending []horizon
	final   int64
}

// advance moves the watermark with a new read of the horizon and returns
// it.
func (m *watermark) advance(h horizon) int64 {
	if len(h.holders) == 0 {
		m.final, m.pending = max(m.final, h.last), m.pending[:0]
		return m.final
	}
	kept := m.pending[:0]
	for _, p := range m.pending {
		if !slices.ContainsFunc(p.holders, func(x string) bool { return slices.Contains(h.holders, x) }) {
			m.final = max(m.final, p.last) // every write that could hold one of them has ended
		} else if p.last > m.final {
			kept = append(kept, p)
		}
	}
	m.pending = kept
	if h.last > m.final && (len(m.pending) == 0 || m.pending[len(m.pending)-1].last < h.last) {
		m.pending = append(m.pending, h)
	}
	// A long queue means a write that does not end: keep the oldest
	// horizons, which are what the watermark waits for.
	if len(m.pending) > 64 {
		m.pending = append(m.pending[:32], m.pending[len(m.pending)-1])
	}
	return m.final
}

// settledRevision is the watermark now: it reads the horizon and waits
// for the writes it names to end (writes in their last round trip, which
// end within a commit), polling.
func (s *Store) settledRevision(ctx context.Context) (int64, error) {
	var m watermark
	wait := time.Millisecond
	target := int64(-1)
	for {
		h, err := readHorizon(ctx, s.pool)
		if err != nil {
			return 0, err
		}
		rev := m.advance(h)
		if target < 0 {
			target = h.last
		}
		if rev >= target {
			return rev, nil
		}
		if !sleep(ctx, wait) {
			return 0, ctx.Err()
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// Revision is the newest revision of the catalog that is final: every
// change up to it is committed (or never will be), and a reader that has
// read the feed up to it has read every change before it.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	rev, err := s.settledRevision(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the catalog revision: %w", err)
	}
	return rev, nil
}
