package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/bindery-dev/bindery/internal/pgtext"
)

// History: the events recorded with writes, read back per object.

// EventRecord is an entry of history the engine records with a status write.
type EventRecord struct {
	Type, Reason, Message, Operation string
}

// HistoryLimit bounds an object's history. Past it, the entries after the
// first HistoryHead are dropped oldest first: an object's first entries
// (its creation, the first failure) tell how it came to be, the latest
// what it is doing; the middle of a long storm tells least.
const (
	HistoryLimit = 1000
	HistoryHead  = 100
)

// addEvent records an entry of an object's history. Its reason and
// message are cut to MaxReason and MaxMessage first. An entry identical to
// one the object already has (type, reason, message and operation) is
// folded into it: its count goes up and its last time moves on, and no
// text is written. A new
// entry keeps the object's history within HistoryLimit entries, keeping
// the first HistoryHead. It is one statement, which goes with the write's
// next round trip.
func addEvent(_ context.Context, w *txn, kind, objectID, typ, reason, message, operation string) error {
	// Cut first, so that entries that differ only past the cut fold.
	typ, reason = pgtext.Clip(typ, maxOperationName), pgtext.Clip(reason, MaxReason)
	message, operation = pgtext.Clip(message, MaxMessage), pgtext.Clip(operation, maxOperationName)
	var op *string
	if operation != "" {
		op = &operation
	}
	// The DELETE does not see the row the INSERT adds (one statement, one
	// snapshot): hence the count's + 1.
	w.queue(nil, `WITH folded AS (
			UPDATE catalog.events SET count = count + 1, last_time = now()
			WHERE id = (SELECT id FROM catalog.events WHERE object_id = $1 AND kind = $2 AND type = $3 AND reason = $4
				AND message = $5 AND operation IS NOT DISTINCT FROM $6 ORDER BY id DESC LIMIT 1)
			RETURNING id),
		added AS (
			INSERT INTO catalog.events (kind, object_id, type, reason, message, operation)
			SELECT $2::text, $1::uuid, $3::text, $4::text, $5::text, $6::text WHERE NOT EXISTS (SELECT FROM folded)
			RETURNING id)
		DELETE FROM catalog.events WHERE EXISTS (SELECT FROM added) AND id IN (
			SELECT id FROM catalog.events WHERE object_id = $1 ORDER BY id OFFSET $7
			LIMIT greatest((SELECT count(*) FROM catalog.events WHERE object_id = $1) + 1 - $8, 0))`,
		objectID, kind, typ, reason, message, op, HistoryHead, HistoryLimit)
	w.events = append(w.events, Event{Kind: kind, ObjectID: objectID, Type: typ, Reason: reason, Message: message, Operation: operation, Time: time.Now()})
	return nil
}

// Events lists an object's history, oldest first: at most limit entries
// (HistoryLimit when limit is not positive), the first ones and the latest
// when there are more.
func (s *Store) Events(ctx context.Context, objectID string, limit int) ([]Event, error) {
	if limit <= 0 || limit > HistoryLimit {
		limit = HistoryLimit
	}
	head := min(HistoryHead, limit/2)
	rows, err := s.pool.Query(ctx, `SELECT * FROM (
		(SELECT id, kind, object_id, type, reason, message, coalesce(operation, ''), created_at, last_time, count
			FROM catalog.events WHERE object_id = $1 ORDER BY id LIMIT $2)
		UNION
		(SELECT id, kind, object_id, type, reason, message, coalesce(operation, ''), created_at, last_time, count
			FROM catalog.events WHERE object_id = $1 ORDER BY id DESC LIMIT $3)) e ORDER BY id`, objectID, head, limit-head)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.ID, &e.Kind, &e.ObjectID, &e.Type, &e.Reason, &e.Message, &e.Operation, &e.Time, &e.LastTime, &e.Count); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, e)
	}
	return out, mapErr(rows.Err())
}

// ObjectEvent is an entry of an object's history with the object's name.
type ObjectEvent struct {
	Event
	Name, Namespace string
}

// historyPruneLock is the advisory lock (as pruneLock) that a round of
// pruning deleted objects' history holds, and historyPruneBatch how many
// entries one of its transactions removes.
const (
	historyPruneLock  = "catalog.events: prune"
	historyPruneBatch = 5000
)

// PruneDeletedHistory removes the history entries of brokers, instances
// and bindings that no longer exist, once they are older than olderThan
// (their last occurrence), unless another process is pruning them (then
// it does nothing). It returns how many it removed.
func (s *Store) PruneDeletedHistory(ctx context.Context, olderThan time.Duration) (int64, error) {
	var total int64
	for {
		n, mine, err := s.pruneHistoryBatch(ctx, olderThan)
		total += n
		if err != nil || !mine || n < historyPruneBatch {
			return total, err
		}
	}
}

func (s *Store) pruneHistoryBatch(ctx context.Context, olderThan time.Duration) (removed int64, mine bool, err error) {
	tx, err := s.beginClaimed(ctx, historyPruneLock, "pruning the history")
	if tx == nil {
		return 0, false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	tag, err := tx.Exec(ctx, `DELETE FROM catalog.events WHERE id IN (
		SELECT e.id FROM catalog.events e WHERE e.last_time < now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT FROM catalog.instances i WHERE i.id = e.object_id)
			AND NOT EXISTS (SELECT FROM catalog.bindings b WHERE b.id = e.object_id)
			AND NOT EXISTS (SELECT FROM catalog.brokers r WHERE r.id = e.object_id)
		LIMIT $2)`, olderThan.Seconds(), historyPruneBatch)
	if err != nil {
		return 0, true, fmt.Errorf("prune deleted objects' history: %w", mapErr(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, true, fmt.Errorf("commit: %w", mapErr(err))
	}
	return tag.RowsAffected(), true, nil
}
