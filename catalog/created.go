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

// sqlCustomPlanForRecord has the statement that records a creation in the
// feed (record), the last before COMMIT, planned for its arguments. Its
// generic plan (sqlGenericPlans) is made once per connection, while the
// tables are small, and kept: creating 30,000 instances then 30,000
// bindings from empty tables, it read 840 and 550 blocks per call on
// average, while holding the revision every write waits for, and
// PostgreSQL's CPU per object at 100,000 rose from 0.59 ms to 0.89 ms.
// Planning it costs about 0.13 ms; scanning costs more the more objects
// there are.
const sqlCustomPlanForRecord = "SET LOCAL plan_cache_mode = force_custom_plan"
