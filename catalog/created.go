package catalog

import "time"

// addCreatedEvent records the first entry of a new object's history: what
// addEvent records, without its folding and trimming, which a history of
// one entry never needs (an object's id is new with it). It goes with the
// write's next round trip.
func addCreatedEvent(w *txn, kind, objectID, message string) {
	const typ, reason = "Normal", "Created"
	w.queue(nil, `INSERT INTO catalog.events (kind, object_id, type, reason, message) VALUES ($1, $2, $3, $4, $5)`,
		kind, objectID, typ, reason, message)
	w.events = append(w.events, Event{Kind: kind, ObjectID: objectID, Type: typ, Reason: reason, Message: message, Time: time.Now()})
}
