package catalog

import (
	"strconv"
	"time"
)

// insertCreated queues, for the write's next round trip, a new object's
// row with the first entry of its history, as one statement: with are the
// data-modifying common table expressions that insert the row (and make
// what follows from it), args their parameters; the history entry is what
// addEvent records, without its folding and trimming, which a history of
// one entry never needs (an object's id is new with it). onErr maps the
// statement's failure, which is the row's: an events row cannot fail.
func insertCreated(w *txn, onErr func(error) error, kind, objectID, message, with string, args ...any) {
	const typ, reason = "Normal", "Created"
	p := func(i int) string { return "$" + strconv.Itoa(len(args)+i) }
	w.queue(onErr, `WITH `+with+`
		INSERT INTO catalog.events (kind, object_id, type, reason, message) VALUES (`+p(1)+`, `+p(2)+`, `+p(3)+`, `+p(4)+`, `+p(5)+`)`,
		append(args, kind, objectID, typ, reason, message)...)
	w.events = append(w.events, Event{Kind: kind, ObjectID: objectID, Type: typ, Reason: reason, Message: message, Time: time.Now()})
}
