// Package wait follows an instance or binding until the engine is done with
// it, polling the REST API with backoff and jitter, and shows a progress
// line: where it stands, in the server's words, and the time elapsed (a
// spinner only on a terminal). It ends on every outcome the server knows
// (the object's progress, openapi.yaml's Progress): done, failed for good,
// or blocked until a person acts — and on the timeout. A poll the server
// cannot answer for now (5xx, 429, a connection lost) ends nothing: the
// operation goes on meanwhile, during a database failover for example, so
// the wait polls again.
package wait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	utilwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/internal/message"
)

// Goal is what the wait is for.
type Goal int

// The goals: the object settled (provisioned, updated, bound), or gone.
const (
	Settled Goal = iota
	Gone
)

// DefaultTimeout is how long --wait waits unless --timeout says otherwise.
const DefaultTimeout = 10 * time.Minute

// Options says what to follow and where to show it.
type Options struct {
	Client *api.Client
	Path   string
	Query  url.Values
	Goal   Goal
	// What names the object in messages: "instance team/db".
	What     string
	Out      io.Writer
	Terminal bool
	// Timeout, when positive, ends the wait with a *TimeoutError.
	Timeout time.Duration
	// The pause between polls starts at First and doubles up to Max
	// (defaults 200ms, 4s); each gets up to a quarter as much again of
	// jitter, so that many waiting clients do not poll in step.
	First, Max time.Duration
	now        func() time.Time
}

// ErrFailed is the outcome of an operation the broker or the engine failed
// for good.
var ErrFailed = errors.New("the operation failed")

// ErrBlocked is the outcome of an operation that cannot go on until a
// person acts.
var ErrBlocked = errors.New("the operation is blocked")

// OutcomeError is how a wait ended other than done: failed (Is ErrFailed)
// or blocked (Is ErrBlocked), with the server's words.
type OutcomeError struct {
	What    string
	State   message.State
	Message string
	// Detail is what the engine or the broker wrote, when it says more.
	Detail  string
	Elapsed time.Duration
}

func (e *OutcomeError) Error() string {
	verb := "failed"
	if e.State == message.Blocked {
		verb = "is blocked"
	}
	s := fmt.Sprintf("%s %s after %s: %s", e.What, verb, elapsed(e.Elapsed), output.Safe(e.Message))
	if e.Detail != "" {
		s += "\n  " + output.SafeLine(e.Detail)
	}
	return s
}

// Is makes errors.Is(err, ErrFailed) or ErrBlocked true.
func (e *OutcomeError) Is(target error) bool {
	return (target == ErrFailed && e.State == message.Failed) || (target == ErrBlocked && e.State == message.Blocked)
}

// TimeoutError is a wait that ran out of time: the operation goes on.
type TimeoutError struct {
	What    string
	After   time.Duration
	Last    string
	Command string
	// Trouble is why the last poll failed, when it did.
	Trouble string
}

func (e *TimeoutError) Error() string {
	s := fmt.Sprintf("stopped waiting for %s after %s (--timeout)", e.What, elapsed(e.After))
	if e.Last != "" {
		s += "; it was still going: " + output.Safe(e.Last)
	}
	if e.Trouble != "" {
		s += "; the last poll failed: " + output.SafeLine(e.Trouble)
	}
	s += "\nThe operation goes on without the wait"
	if e.Command != "" {
		s += "; `" + e.Command + "` shows how it ends"
	}
	return s + "."
}

var spinner = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

// progress is the part of an object's answer the wait reads.
type progress struct {
	State   message.State
	Reason  string
	Message string
	Detail  string
}

func progressOf(obj api.Object) progress {
	p := progress{State: message.State(obj.Str("progress", "state")), Reason: obj.Str("progress", "reason"),
		Message: obj.Str("progress", "message"), Detail: obj.Str("progress", "detail")}
	if p.State == "" {
		p.State, p.Message = message.Working, "Waiting for the engine."
		if f := obj.Condition("Failed"); f.Str("status") == "True" {
			p.State, p.Message = message.Failed, f.Str("message")
		}
	}
	return p
}

// Follow polls until the goal is reached, the operation fails or is
// blocked, the timeout passes or ctx ends; it returns the last object seen
// (nil when gone).
func Follow(ctx context.Context, o Options) (api.Object, error) {
	o.defaults()
	parent := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	f := follower{o: o, start: o.now(), pauses: o.pauses()}
	for {
		obj, done, err := f.poll(ctx)
		if done || (err != nil && ctx.Err() == nil) {
			return obj, err
		}
		if !f.pause(ctx) {
			f.finish("")
			if parent.Err() != nil {
				return nil, parent.Err()
			}
			return nil, &TimeoutError{What: o.What, After: o.now().Sub(f.start), Last: f.last, Trouble: f.trouble}
		}
	}
}

func (o *Options) defaults() {
	if o.First <= 0 {
		o.First = 200 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = 4 * time.Second
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.What == "" {
		o.What = "the object"
	}
}

// pauses is the backoff between polls: the longest pause is Max and a
// quarter, 5 s by default.
func (o *Options) pauses() utilwait.Backoff {
	return utilwait.Backoff{Duration: o.First, Factor: 2, Jitter: 0.25, Steps: math.MaxInt32, Cap: o.Max}
}

// maxRetryAfter caps the pause a server's Retry-After asks for: the wait
// has a timeout of its own, and a server back sooner should be seen.
const maxRetryAfter = 30 * time.Second

// follower is one wait's state between polls.
type follower struct {
	o      Options
	start  time.Time
	pauses utilwait.Backoff
	last   string
	frame  int
	// trouble says why the last poll failed, while it is tried again;
	// hold is the pause the server asked for then (Retry-After).
	trouble string
	hold    time.Duration
}

// poll reads the object once: done reports an outcome (then err says
// which, nil for success).
func (f *follower) poll(ctx context.Context) (api.Object, bool, error) {
	o := f.o
	obj, err := o.Client.Get(ctx, o.Path, o.Query)
	switch {
	case o.Goal == Gone && api.NotFound(err):
		f.finish(fmt.Sprintf("done in %s: %s is deleted.", elapsed(o.now().Sub(f.start)), o.What))
		return nil, true, nil
	case err != nil && ctx.Err() == nil:
		if retry, after := api.Transient(err); retry {
			f.troubled(err, after)
			return nil, false, nil
		}
		f.finish("")
		return nil, true, err
	case err != nil:
		return nil, false, nil
	}
	f.trouble, f.hold = "", 0
	p := progressOf(obj)
	took := o.now().Sub(f.start)
	switch {
	case p.State == message.Failed || p.State == message.Blocked:
		f.finish("")
		if p.Reason == "DeprovisionBlockedByExistingCredentials" {
			p.Message = message.BlockedByBindings(bindingsOf(ctx, o.Client, obj))
		}
		return obj, true, &OutcomeError{What: o.What, State: p.State, Message: p.Message, Detail: p.Detail, Elapsed: took}
	case p.State == message.Ready && o.Goal == Settled:
		f.finish(fmt.Sprintf("done in %s: %s", elapsed(took), output.SafeLine(p.Message)))
		return obj, true, nil
	}
	line := p.Message
	if p.State == message.Retrying && p.Detail != "" {
		line += " (" + p.Detail + ")"
	}
	if !o.Terminal && line != f.last {
		fmt.Fprintf(o.Out, "%s (%s)\n", output.SafeLine(line), elapsed(took))
	}
	f.last = line
	return obj, false, nil
}

// troubled notes a poll the server could not answer for now, to be tried
// again after at least after (capped, with jitter so that the clients
// told the same Retry-After do not come back together), and says so once
// per change when not on a terminal.
func (f *follower) troubled(err error, after time.Duration) {
	line := "The server could not be reached (" + err.Error() + "); trying again."
	var e *api.Error
	if errors.As(err, &e) {
		line = fmt.Sprintf("The server answered %d %s", e.Status, http.StatusText(e.Status))
		if e.Message != "" {
			line += " (" + e.Message + ")"
		}
		line += "; trying again."
	}
	if !f.o.Terminal && line != f.trouble {
		fmt.Fprintf(f.o.Out, "%s (%s)\n", output.SafeLine(line), elapsed(f.o.now().Sub(f.start)))
	}
	f.trouble = line
	f.hold = 0
	if after > 0 {
		f.hold = utilwait.Jitter(min(after, maxRetryAfter), 0.25)
	}
}

// pause waits for the next poll, turning the spinner on a terminal; false
// when ctx ended first.
func (f *follower) pause(ctx context.Context) bool {
	next := time.After(max(f.pauses.Step(), f.hold))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if f.o.Terminal {
			// The spinner turns between polls; the server sees only the polls.
			line := f.last
			if f.trouble != "" {
				line = f.trouble
			}
			fmt.Fprintf(f.o.Out, "\r\033[K%c %s (%s)", spinner[f.frame%len(spinner)], output.SafeLine(line), elapsed(f.o.now().Sub(f.start)))
			f.frame++
		}
		select {
		case <-ctx.Done():
			return false
		case <-next:
			return true
		case <-tick.C:
		}
	}
}

func (f *follower) finish(line string) {
	if f.o.Terminal {
		fmt.Fprint(f.o.Out, "\r\033[K")
	}
	if line != "" {
		fmt.Fprintln(f.o.Out, line)
	}
}

// bindingsOf lists the names of the bindings of an instance, for saying
// which ones block its deletion; none when they cannot be read.
func bindingsOf(ctx context.Context, c *api.Client, in api.Object) []string {
	items, err := c.List(ctx, "/bindings", url.Values{"namespace": {in.Str("namespace")}})
	if err != nil {
		return nil
	}
	var names []string
	for _, b := range items {
		if b.Str("spec", "instanceRef", "name") == in.Str("name") {
			names = append(names, b.Str("name"))
		}
	}
	return names
}

func elapsed(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// failure is an operation that failed, said in a sentence.
type failure struct{ msg string }

func (e *failure) Error() string        { return e.msg }
func (e *failure) Is(target error) bool { return target == ErrFailed }

// Failure returns an error that says msg and is ErrFailed (exit code 5):
// an operation the server reports failed, outside a wait.
func Failure(msg string) error { return &failure{msg: msg} }
