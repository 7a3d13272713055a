package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	rowbackoff "github.com/bindery-dev/bindery/internal/backoff"
	"github.com/bindery-dev/bindery/internal/osb"
)

// Every call to a broker that fails is tried again after a wait that grows
// with each failure in a row: per object and per operation, held in the
// object's status (catalog.Retry) rather than in the work queue's memory.
// So every replica and a restarted engine wait as long; the engine's own
// status writes, which wake the object up through the change feed, find
// the wait still running and go back to sleep; and a user's change to the
// spec (a new generation) starts afresh.

// retryPoll is the backoff key of polls of an asynchronous operation that
// failed (the broker's last_operation endpoint answered an error). The
// other keys are the operations (catalog.OperationProvision, ...).
const retryPoll = "LastOperation"

// jitterShare is the largest share of a wait taken off at random, so that
// objects that failed together do not all come back together.
const jitterShare = 0.2

// Default backoff, as Service Catalog had it: one second, doubling, up to
// twenty minutes.
const (
	DefaultRetryBase          = time.Second
	DefaultRetryCap           = 20 * time.Minute
	DefaultMaxPollingDuration = time.Hour
)

// backoff is the wait before the next attempt after failures in a row.
type backoff struct {
	base, cap time.Duration
	// random returns a number in [0, 1).
	random func() float64
}

// delay is the wait after the n-th failure in a row (n ≥ 1):
// base·2^(n−1), at most cap, less up to jitterShare of it at random.
func (b backoff) delay(n int) time.Duration {
	jitter := 0.0
	if b.random != nil {
		jitter = jitterShare * b.random()
	}
	return rowbackoff.Delay(b.base, b.cap, n, jitter)
}

// steady is delay without its jitter.
func (b backoff) steady(n int) time.Duration { return rowbackoff.Delay(b.base, b.cap, n, 0) }

func newBackoff(base, limit time.Duration) backoff {
	return backoff{base: base, cap: limit, random: rand.Float64}
}

// retryWait is how long operation op must still wait under the backoff
// held in retries for generation gen (0: it may go now).
// A broker's breaker that closed lifts the wait (run.bypass).
func (c *Controller) retryWait(ctx context.Context, retries map[string]catalog.Retry, op string, gen int64) time.Duration {
	r, ok := catalog.RetryFor(retries, op, gen)
	if !ok || (runOf(ctx) != nil && runOf(ctx).bypass) {
		return 0
	}
	return max(r.NextAttempt.Sub(c.now()), 0)
}

// failed counts one more failure of op, which cost the broker one
// request, and returns the wait before the next attempt: the backoff's, or
// the broker's Retry-After when longer.
func (c *Controller) failed(retries *map[string]catalog.Retry, op string, gen int64, cause error) time.Duration {
	return c.recordFailure(retries, op, gen, cause, 1)
}

// failedMitigated is failed for a provision or bind whose failure is
// orphan-mitigated: it cost two requests (the attempt and its clean-up).
func (c *Controller) failedMitigated(retries *map[string]catalog.Retry, op string, gen int64, cause error) time.Duration {
	return c.recordFailure(retries, op, gen, cause, 2)
}

// failedAsync is failed for an asynchronous operation that ended failed
// after polls: it cost the request that started it and each poll, twice
// when it is orphan-mitigated. So a broker whose operations fail after a
// few seconds of polling waits as long for the next attempt as the
// requests it was sent call for, instead of getting a new attempt every
// few seconds.
func (c *Controller) failedAsync(retries *map[string]catalog.Retry, op string, gen int64, polls int, mitigated bool) time.Duration {
	cost := 1 + polls
	if mitigated {
		cost *= 2
	}
	return c.recordFailure(retries, op, gen, nil, cost)
}

// recordFailure counts one more failure of op, which cost the broker cost
// requests, and returns the wait before the next attempt: the backoff
// doubles with each request failed attempts cost in a row.
func (c *Controller) recordFailure(retries *map[string]catalog.Retry, op string, gen int64, cause error, cost int) time.Duration {
	r, _ := catalog.RetryFor(*retries, op, gen)
	r.Requests = r.Weight() + cost
	r.Failures++
	r.Generation = gen
	// A broker's Retry-After is obeyed up to the longest backoff.
	wait := max(c.backoff.delay(r.Requests), min(retryAfter(cause), c.backoff.cap))
	r.NextAttempt = c.now().UTC().Add(wait)
	if *retries == nil {
		*retries = map[string]catalog.Retry{}
	}
	(*retries)[op] = r
	c.metrics.retries.WithLabelValues(op).Inc()
	return wait
}

// tidyRetries drops what no longer applies: backoffs of an older
// generation, and of polls once no operation is in progress.
func tidyRetries(retries *map[string]catalog.Retry, gen int64, async bool) {
	for op, r := range *retries {
		if r.Generation != gen || (op == retryPoll && !async) {
			delete(*retries, op)
		}
	}
	if len(*retries) == 0 {
		*retries = nil
	}
}

// retryAfter is the broker's Retry-After carried by an error answer.
func retryAfter(err error) time.Duration {
	var he *osb.HTTPError
	if errors.As(err, &he) {
		return he.RetryAfter
	}
	return 0
}

// retrying is what a condition message adds about the next attempt.
func retrying(retries map[string]catalog.Retry, op string) string {
	r := retries[op]
	return fmt.Sprintf(" (attempt %d failed; next attempt at %s)", r.Failures, r.NextAttempt.Format(time.RFC3339))
}

// writeInstance is the engine's status write of an instance: fn's change,
// with the backoffs that no longer apply dropped. base is the instance as
// the reconcile last read or wrote it: when the row is still at its
// revision, the write needs no read of its own.
// A status change the reconcile has still to write (run.pending) goes
// with it.
func (c *Controller) writeInstance(ctx context.Context, base *catalog.Instance, fn func(*catalog.Instance) error, events ...catalog.EventRecord) (*catalog.Instance, error) {
	var pending *pendingWrite
	if r := runOf(ctx); r != nil && r.pending != nil {
		pending, r.pending = r.pending, nil
		events = append(pending.events, events...)
	}
	id := base.ID
	in, err := c.store.UpdateInstanceStatusFrom(ctx, base, func(in *catalog.Instance) error {
		if pending != nil {
			pending.fn(in)
		}
		if err := fn(in); err != nil {
			return err
		}
		tidyRetries(&in.Status.Retries, in.Generation, in.Status.AsyncOpInProgress)
		return nil
	}, events...)
	if err == nil {
		c.wake.wrote(instanceKey(in.Namespace, id), in.ResourceVersion, instanceSettled(in))
		wrote(ctx, in.ResourceVersion)
		if !in.Status.AsyncOpInProgress {
			c.forgetPolls(id)
		}
	}
	return in, err
}

// writeBinding is writeInstance for a binding.
func (c *Controller) writeBinding(ctx context.Context, base *catalog.Binding, fn func(*catalog.Binding) error, creds map[string]any, events ...catalog.EventRecord) (*catalog.Binding, error) {
	id := base.ID
	b, err := c.store.UpdateBindingStatusFrom(ctx, base, func(b *catalog.Binding) error {
		if err := fn(b); err != nil {
			return err
		}
		tidyRetries(&b.Status.Retries, b.Generation, b.Status.AsyncOpInProgress)
		return nil
	}, creds, events...)
	if err == nil {
		c.wake.wrote(bindingKey(b.Namespace, id), b.ResourceVersion, bindingSettled(b))
		wrote(ctx, b.ResourceVersion)
		if !b.Status.AsyncOpInProgress {
			c.forgetPolls(id)
		}
	}
	return b, err
}

// maxPolling is how long an asynchronous operation is polled before it is
// failed: the platform's maximum, or the plan's maximum_polling_duration
// when shorter (OSB 2.17, "Polling Interval and Duration").
func (c *Controller) maxPolling(plan *catalog.ServicePlan) time.Duration {
	d := c.maxPoll
	if p := plan.Spec.MaximumPollingDuration; p != nil && *p > 0 && time.Duration(*p)*time.Second < d {
		d = time.Duration(*p) * time.Second
	}
	return d
}

// untilExpiry is wait, or less: no later than just past the operation's
// maximum polling duration, when the next look fails it. A broker's
// Retry-After may ask for an hour, or a day; the next look in between
// finds the poll not due and would not look at the deadline.
func (c *Controller) untilExpiry(plan *catalog.ServicePlan, started *time.Time, wait time.Duration) time.Duration {
	if started == nil {
		return wait
	}
	left := started.Add(c.maxPolling(plan)).Sub(c.now()) + time.Millisecond
	return max(time.Millisecond, min(wait, left))
}

// pollExpired reports an operation polled past its maximum duration.
func (c *Controller) pollExpired(plan *catalog.ServicePlan, started *time.Time) (time.Duration, bool) {
	d := c.maxPolling(plan)
	return d, started != nil && c.now().Sub(*started) > d
}
