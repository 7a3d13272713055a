package catalog

import (
	"context"
	"errors"
	"slices"
)

// The Available condition of a broker is the engine's circuit breaker for
// it: there, False, while the engine holds requests to the broker back
// because it stopped answering; gone once it answers again. Absent when
// closed so that clients which show a broker's last condition (svcat)
// show Ready as before, and CircuitOpen while the breaker is open.
// Service Catalog had no such condition.
const (
	ConditionAvailable = "Available"
	// ReasonCircuitOpen: requests to the broker failed or timed out too
	// often in a row; the engine sends none until a probe succeeds.
	ReasonCircuitOpen = "CircuitOpen"
	// ReasonCircuitClosed: the broker answered again (the history's
	// entry; the condition is removed).
	ReasonCircuitClosed = "CircuitClosed"
)

// SetBrokerAvailable records the engine's circuit breaker for a broker:
// not available (msg says why) sets the Available condition to False,
// available removes it; each change with a history entry. Nothing is
// written when the broker is already so, and a broker that is gone is no
// error.
func (s *Store) SetBrokerAvailable(ctx context.Context, id string, available bool, msg string) error {
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Broker](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		_, open := FindCondition(b.Status.Conditions, ConditionAvailable)
		event := EventRecord{Type: "Warning", Reason: ReasonCircuitOpen, Message: msg}
		if available {
			if !open {
				return nil
			}
			b.Status.Conditions = slices.DeleteFunc(b.Status.Conditions, func(c Condition) bool { return c.Type == ConditionAvailable })
			event = EventRecord{Type: "Normal", Reason: ReasonCircuitClosed, Message: msg}
		} else if !SetCondition(&b.Status.Conditions, Condition{Type: ConditionAvailable, Status: ConditionFalse, Reason: ReasonCircuitOpen, Message: msg}, s.now().UTC()) {
			return nil
		}
		if _, err := w.Exec(ctx, `UPDATE catalog.brokers SET status = $2 WHERE id = $1`, id, mustJSON(b.Status)); err != nil {
			return mapErr(err)
		}
		if err := addEvent(ctx, w, b.kind(), id, event.Type, event.Reason, event.Message, ""); err != nil {
			return err
		}
		w.changed(Modified, b)
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
