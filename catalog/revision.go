package catalog

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Revisions. Every write takes a revision for each change it makes from
// the catalog.revisions sequence in its last round trip, once it holds
// every row it changes, and commits without waiting for other writes;
// PostgreSQL flushes concurrent commits together. Revisions are then
// taken in the order of conflicting writes, but a revision may commit
// after a higher one: the feed is read up to a watermark below which
// every revision is final (committed, or never to be), so that a reader
// never moves past a change still in flight, and hands out changes in
// revision order.
//
// What tells a reader which revisions may still be in flight is a lock: a
// write takes catalog.revision (the table of the counter revisions came
// from before) in ROW EXCLUSIVE mode before it takes its first revision,
// and holds it until it commits; with its first revision it takes an
// advisory lock keyed by it (catalog.take_revision), and its others come
// after it. Reading the sequence's last value L, then the lock's holders
// H: every revision up to L not yet committed belongs to one of H, and
// the first revisions of those of H that have taken theirs bound them
// from below. So every revision below the lowest of those is final,
// unless a write of H has not taken its first revision yet (a moment
// between the two locks): then the reader keeps (L, H) and moves its
// watermark to L once every write of H has ended.
//
// A list needs a snapshot that holds every change up to its revision and
// none after it: it takes the lock in SHARE mode, which waits for the
// writes in their last round trip and holds back new ones, takes its
// snapshot and lets go of the lock at once (snapshot.go).

// revisionLockSpace is the first key of the advisory lock a write holds
// on its first revision (catalog.take_revision), the second being the revision
// modulo 2^32.
const revisionLockSpace = 1650749049

// horizonSQL reads, in this order and each with a snapshot of its own,
// the last revision handed out, then the writes that may hold one not yet
// committed (their virtual transaction ids) and the revisions of those that
// have taken theirs (the advisory locks' second keys, as unsigned), from
// one read of the lock table.
var horizonSQL = [2]string{
	`SELECT last_value FROM catalog.revisions`,
	`WITH l AS MATERIALIZED (SELECT locktype, relation, classid, objid, objsubid, mode, virtualtransaction FROM pg_locks
			WHERE granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
		SELECT coalesce((SELECT array_agg(virtualtransaction) FROM l
				WHERE locktype = 'relation' AND relation = 'catalog.revision'::regclass AND mode = 'RowExclusiveLock'), '{}'),
			coalesce((SELECT array_agg(virtualtransaction ORDER BY objid) FROM l
				WHERE locktype = 'advisory' AND classid = ` + fmt.Sprint(revisionLockSpace) + ` AND objsubid = 2), '{}'),
			coalesce((SELECT array_agg(objid::text::bigint ORDER BY objid) FROM l
				WHERE locktype = 'advisory' AND classid = ` + fmt.Sprint(revisionLockSpace) + ` AND objsubid = 2), '{}')`,
}

// horizon is what one read of horizonSQL found.
type horizon struct {
	last int64
	// holders are the writes that may hold a revision not yet committed;
	// taken are the revisions of those of them that have taken theirs.
	holders []string
	taken   map[string]int64
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
	var lockers []string
	var keys []int64
	if err := br.QueryRow().Scan(&h.holders, &lockers, &keys); err != nil {
		return h, fmt.Errorf("read the writes in flight: %w", mapErr(err))
	}
	h.taken = map[string]int64{}
	for i, vxid := range lockers {
		h.taken[vxid] = revisionNear(h.last, keys[i])
	}
	return h, nil
}

// revisionNear is the revision less than 2^31 away from last whose lock
// key (catalog.take_revision's second key, read as unsigned) is key.
func revisionNear(last, key int64) int64 {
	const span, half = 1 << 32, 1 << 31
	mod := (key + half) % span // the revision modulo 2^32
	return last + ((mod-last+half)%span+span)%span - half
}

// watermark follows, for one reader, the highest revision below which
// every revision is final.
type watermark struct {
	// pending are the bounds of earlier reads that wait for writes whose
	// revision is not known (they had not taken it when read), oldest
	// first.
	pending []horizon
	final   int64
}

// advance moves the watermark with a new read of the horizon and returns
// it. Every revision up to h.last is final but those the holders of the
// lock may hold: of a holder that has taken its revision, that one; of
// one that has not (seen between taking the lock and the revision), any,
// until it has ended.
func (m *watermark) advance(h horizon) int64 {
	bound := h.last
	var unknown []string
	for _, x := range h.holders {
		if rev, ok := h.taken[x]; !ok {
			unknown = append(unknown, x)
		} else if rev <= bound {
			bound = rev - 1
		}
	}
	kept := m.pending[:0]
	for _, p := range m.pending {
		if !slices.ContainsFunc(p.holders, func(x string) bool { return slices.Contains(h.holders, x) }) {
			m.final = max(m.final, p.last) // the writes it waited for have ended
		} else if p.last > m.final {
			kept = append(kept, p)
		}
	}
	m.pending = kept
	if len(unknown) == 0 {
		m.final = max(m.final, bound)
	} else if bound > m.final {
		m.pending = append(m.pending, horizon{last: bound, holders: unknown})
		// A long queue means a write that does not end: keep the oldest
		// bounds, which are what the watermark waits for.
		if len(m.pending) > 64 {
			m.pending = append(m.pending[:32], m.pending[len(m.pending)-1])
		}
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
