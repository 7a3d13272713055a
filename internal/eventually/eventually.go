// Package eventually is how tests wait for something that happens in the
// background: a condition polled until it holds, with one deadline and one
// failure message, instead of a hand-written sleep loop in every test.
//
// A check that something did not happen ("not retried", "no second call")
// does not belong here: wait for a positive event that comes after the one
// that must not happen, then read the counter.
package eventually

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Interval is how often a condition is polled: short enough that a test
// waits little longer than the system under test, long enough not to load
// a shared machine.
const Interval = 20 * time.Millisecond

// Succeeds calls f every Interval until it returns nil and fails t, with
// f's last error, when it still fails after timeout. f's context ends at
// the deadline; f may call t.Fatal for an error that waiting cannot cure.
func Succeeds(t testing.TB, timeout time.Duration, f func(ctx context.Context) error) {
	t.Helper()
	if err := Poll(t.Context(), timeout, f); err != nil {
		t.Fatal(err)
	}
}

// Poll calls f every Interval until it returns nil and returns nil, or
// returns f's last error once timeout has passed or ctx has ended. It is
// for helpers that fail a test with a message of their own (a status or a
// log tail); tests call Succeeds.
func Poll(ctx context.Context, timeout time.Duration, f func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, Interval, timeout, true, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		return last == nil, nil
	})
	if err == nil {
		return nil
	}
	if last == nil {
		last = errors.New("never tried")
	}
	return &TimeoutError{After: timeout, Last: last}
}

// TimeoutError is what Poll returns when the condition never held: how
// long it waited and the condition's last error.
type TimeoutError struct {
	After time.Duration
	Last  error
}

func (e *TimeoutError) Error() string {
	return "still failing after " + e.After.String() + ": " + e.Last.Error()
}

// Unwrap gives the condition's last error, for errors.Is and errors.As.
func (e *TimeoutError) Unwrap() error { return e.Last }
