package catalog

import (
	"context"
	"time"
)

// History: the events recorded with writes, read back per object.

// EventRecord is an entry of history the engine records with a status write.
type EventRecord struct {
	Type, Reason, Message, Operation string
}

// addEvent records an entry of an object's history.
func addEvent(ctx context.Context, w *txn, kind, objectID, typ, reason, message, operation string) error {
	var op *string
	if operation != "" {
		op = &operation
	}
	_, err := w.Exec(ctx, `INSERT INTO catalog.events (kind, object_id, type, reason, message, operation) VALUES ($1, $2, $3, $4, $5, $6)`,
		kind, objectID, typ, reason, message, op)
	if err != nil {
		return mapErr(err)
	}
	w.events = append(w.events, Event{Kind: kind, ObjectID: objectID, Type: typ, Reason: reason, Message: message, Operation: operation, Time: time.Now()})
	return nil
}

// Events lists an object's history, oldest first.
func (s *Store) Events(ctx context.Context, objectID string, limit int) ([]Event, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := s.pool.Query(ctx, `SELECT id, kind, object_id, type, reason, message, coalesce(operation, ''), created_at
		FROM catalog.events WHERE object_id = $1 ORDER BY id DESC LIMIT $2`, objectID, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.ID, &e.Kind, &e.ObjectID, &e.Type, &e.Reason, &e.Message, &e.Operation, &e.Time); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, e)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, mapErr(rows.Err())
}

// ObjectEvent is an entry of an object's history with the object's name.
type ObjectEvent struct {
	Event
	Name, Namespace string
}
