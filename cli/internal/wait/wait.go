// Package wait follows an instance or binding until the engine is done with
// it, polling the REST API with backoff and jitter, and shows a progress
// line: the current operation and the time elapsed (a spinner only on a
// terminal).
package wait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/bindery-dev/bindery/cli/internal/api"
)

// Goal is what the wait is for.
type Goal int

// The goals: the object settled (provisioned, updated, bound), or gone.
const (
	Settled Goal = iota
	Gone
)

// Options says what to follow and where to show it.
type Options struct {
	Client   *api.Client
	Path     string
	Query    url.Values
	Goal     Goal
	Out      io.Writer
	Terminal bool
	// Timeout, when positive, ends the wait with an error.
	Timeout time.Duration
	// Backoff starts at First and grows to Max (defaults 200ms, 5s).
	First, Max time.Duration
	now        func() time.Time
}

// ErrFailed is the outcome of an operation the broker or the engine failed.
var ErrFailed = errors.New("the operation failed")

var spinner = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

// Follow polls until the goal is reached, the operation fails or ctx ends;
// it returns the last object seen (nil when gone).
func Follow(ctx context.Context, o Options) (api.Object, error) {
	if o.First <= 0 {
		o.First = 200 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = 5 * time.Second
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	start := o.now()
	delay := o.First
	last := ""
	frame := 0
	for {
		obj, err := o.Client.Get(ctx, o.Path, o.Query)
		if o.Goal == Gone && api.NotFound(err) {
			o.finish(fmt.Sprintf("done: deleted (%s)", elapsed(o.now().Sub(start))))
			return nil, nil
		}
		if err != nil && ctx.Err() == nil {
			o.finish("")
			return nil, err
		}
		op := last
		if err == nil {
			done, failed, msg := state(obj, o.Goal)
			op = obj.Str("status", "currentOperation")
			if op == "" {
				op = "waiting for the engine"
			}
			switch {
			case failed:
				o.finish(fmt.Sprintf("failed after %s: %s", elapsed(o.now().Sub(start)), msg))
				return obj, fmt.Errorf("%w: %s", ErrFailed, msg)
			case done:
				o.finish(fmt.Sprintf("done in %s: %s", elapsed(o.now().Sub(start)), msg))
				return obj, nil
			case !o.Terminal && op != last:
				fmt.Fprintf(o.Out, "%s (%s)\n", op, elapsed(o.now().Sub(start)))
			}
			last = op
		}
		// Jitter over the second half of the delay keeps many waiting
		// clients from polling in step; the delay doubles up to Max.
		next := time.After(delay/2 + rand.N(delay/2+1))
		delay = min(delay*2, o.Max)
		tick := time.NewTicker(100 * time.Millisecond)
	wait:
		for {
			if o.Terminal {
				// The spinner turns between polls; the server sees only the polls.
				fmt.Fprintf(o.Out, "\r\033[K%c %s (%s)", spinner[frame%len(spinner)], op, elapsed(o.now().Sub(start)))
				frame++
			}
			select {
			case <-ctx.Done():
				tick.Stop()
				o.finish("")
				return nil, fmt.Errorf("stopped waiting after %s: %w (the operation goes on; `bindery describe` shows how it ends)", elapsed(o.now().Sub(start)), ctx.Err())
			case <-next:
				break wait
			case <-tick.C:
			}
		}
		tick.Stop()
	}
}

func (o Options) finish(line string) {
	if o.Terminal {
		fmt.Fprint(o.Out, "\r\033[K")
	}
	if line != "" {
		fmt.Fprintln(o.Out, line)
	}
}

func elapsed(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// state reads the object's conditions: done, failed, and the message the
// broker or the engine left.
func state(obj api.Object, goal Goal) (done, failed bool, msg string) {
	ready := obj.Condition("Ready")
	msg = ready.Str("message")
	if f := obj.Condition("Failed"); f.Str("status") == "True" {
		m := f.Str("message")
		if m == "" {
			m = obj.Str("status", "lastError")
		}
		return false, true, m
	}
	if goal == Gone {
		return false, false, msg
	}
	busy := obj.Bool("status", "asyncOpInProgress") || obj.Str("status", "currentOperation") != ""
	gen, _ := obj.Get("generation").(float64)
	rec, _ := obj.Get("status", "reconciledGeneration").(float64)
	if ready.Str("status") == "True" && !busy && rec >= gen {
		return true, false, msg
	}
	return false, false, msg
}
