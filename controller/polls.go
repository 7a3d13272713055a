package controller

import (
	"sync"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// Polling an asynchronous operation.
//
// An operation is polled first half a second after the broker accepted
// it, then each time after as long as it has run so far (so at 0.5 s,
// 1.5 s, 3 s, 6 s, ... — at most 8 requests in its first minute), at most
// every 30 s, and never before the broker's Retry-After, to the second.
// When the operation's earlier attempts failed, its polls start later:
// the first waits as long as the backoff after those failures (without
// its jitter; at least half a second, at most 30 s), so a broker whose
// operations keep failing is not polled from the shortest delay on every
// attempt.
//
// Polls that only confirm "in progress" write nothing: no status, no
// history, no change of the feed. The broker's description of progress is
// written into Ready when it says something new, once the operation has
// run a minute, and then at most once a minute: an operation that ends
// within a minute costs its object no write for its progress.

const (
	pollBase = 500 * time.Millisecond
	pollCap  = 30 * time.Second
	// describeEvery is how often the broker's description of an operation
	// in progress may be written.
	describeEvery = time.Minute
)

// pollState is what the engine keeps in memory about an object's
// operation in progress: kept in memory only, a restarted engine polls
// once sooner, which the spec allows.
type pollState struct {
	mu sync.Mutex
	// next is when the operation may be polled again: status writes wake
	// an object up early, and a poll must still wait for Retry-After.
	next time.Time
	// count is the operation's polls so far.
	count int
	// described is when the broker's description was last written, or
	// when the operation was accepted.
	described time.Time
}

func (c *Controller) pollOf(id string) *pollState {
	p, _ := c.polls.LoadOrStore(id, &pollState{})
	return p.(*pollState)
}

// pollDue reports whether the object may be polled now; if not, how long
// until it may.
func (c *Controller) pollDue(id string) (time.Duration, bool) {
	p, ok := c.polls.Load(id)
	if !ok {
		return 0, true
	}
	ps := p.(*pollState)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if wait := ps.next.Sub(c.now()); wait > 0 {
		return wait, false
	}
	return 0, true
}

// accepted records an operation the broker accepted, to be polled after
// delay, and returns it.
func (c *Controller) accepted(id string, delay time.Duration) time.Duration {
	ps := c.pollOf(id)
	ps.mu.Lock()
	ps.next, ps.count, ps.described = c.now().Add(delay), 0, c.now()
	ps.mu.Unlock()
	return delay
}

// polled records a poll of the object's operation and when it may be
// polled next, and returns the delay.
func (c *Controller) polled(id string, delay time.Duration) time.Duration {
	ps := c.pollOf(id)
	ps.mu.Lock()
	ps.next = c.now().Add(delay)
	ps.count++
	ps.mu.Unlock()
	return delay
}

// pollsMade is how many times the object's operation was polled.
func (c *Controller) pollsMade(id string) int {
	p, ok := c.polls.Load(id)
	if !ok {
		return 0
	}
	ps := p.(*pollState)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.count
}

// describe reports whether the broker's new description of the object's
// operation may be written now, and if so counts it as written.
func (c *Controller) describe(id string) bool {
	ps := c.pollOf(id)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if now := c.now(); now.Sub(ps.described) >= describeEvery {
		ps.described = now
		return true
	}
	return false
}

// progress is what Ready says of an operation still in progress after a
// poll, and whether it is to be written: when polling works again after
// failed polls, when Ready said the object waited for its broker, or when
// the broker's description says something new (at most once a minute).
// Otherwise a poll writes nothing.
func (c *Controller) progress(id string, conds []catalog.Condition, retries map[string]catalog.Retry, op, description string) (reason, msg string, write bool) {
	reason, msg = inProgress(op, description)
	ready, _ := catalog.FindCondition(conds, catalog.ConditionReady)
	_, pollFailed := retries[retryPoll]
	switch {
	case pollFailed, ready.Reason == reasonWaitBroker:
		return reason, msg, true
	case description == "" || (ready.Reason == reason && ready.Message == msg):
		return reason, msg, false
	}
	return reason, msg, c.describe(id)
}

// forgetPolls drops the object's poll state once no operation is in
// progress.
func (c *Controller) forgetPolls(id string) { c.polls.Delete(id) }

// pollDelay is when to poll an asynchronous operation next: after as long
// as it has run (from started), at least pollBase or, when earlier
// attempts failed, the backoff of their weight; at most pollCap; and never
// before the broker's Retry-After.
func (c *Controller) pollDelay(started *time.Time, retryAfter time.Duration, weight int) time.Duration {
	d := pollBase
	if weight > 0 {
		d = max(d, c.backoff.steady(weight))
	}
	if started != nil {
		d = max(d, c.now().Sub(*started))
	}
	return max(retryAfter, min(d, pollCap))
}

// attemptWeight is the weight in status.retries of op's earlier failures
// for generation gen.
func attemptWeight(retries map[string]catalog.Retry, op string, gen int64) int {
	r, ok := catalog.RetryFor(retries, op, gen)
	if !ok {
		return 0
	}
	return r.Weight()
}
