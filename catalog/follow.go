package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/apimachinery/pkg/util/wait"
)

// FollowOptions say what Follow reads and when it reads without being
// woken.
type FollowOptions struct {
	// Kinds limits the changes handed on to these kinds; none means all.
	Kinds []string
	// Page is how many changes are read at once (default 1000); a
	// revision is never split across pages.
	Page int
	// Idle is how often Follow reads the feed without being woken, and
	// calls OnIdle (default 5 seconds).
	Idle time.Duration
	// NamesOnly leaves the documents out: each change's Object has only
	// the object's id, namespace and name (and a binding's change its
	// InstanceID), for readers that read the objects themselves.
	NamesOnly bool
	// OnIdle, when set, is called every Idle, whether notifications came
	// or not. Its error is logged; Follow goes on.
	OnIdle func(ctx context.Context) error
}

// followRetry is the wait between attempts to follow the feed again after
// a failure: a second doubling up to 30 seconds, each with up to half as
// much again of jitter, so replicas that lost the database together do not
// come back in step.
var followRetry = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 30 * time.Second}

// Follow follows the change feed after revision after until ctx ends. It
// hands fn every change, oldest first, one page at a time: first what is
// already in the feed (catching up), then, each time a write's NOTIFY on
// NotifyChannel wakes it (and every opts.Idle), what followed. It listens
// on a connection of its own, not one of the pool's, which the work fn
// does never waits for.
//
// A failed connection, read or fn is logged and tried again with backoff
// and jitter, from the end of the last page fn took: a page fn failed on
// is handed to it again — on the new primary after a failover, which has
// every change a reader could have seen when replication is synchronous
// (a change is visible only once the standby has it). A feed found behind
// that position lost writes, and is read on from where it is
// (checkBehind). Follow returns once ctx ends, never sooner.
func (f *Feed) Follow(ctx context.Context, after int64, opts FollowOptions, fn func(ctx context.Context, page []Change) error) {
	if opts.Page <= 0 {
		opts.Page = 1000
	}
	if opts.Idle <= 0 {
		opts.Idle = 5 * time.Second
	}
	pos := after
	var m watermark
	retry := followRetry
	for {
		err := f.follow(ctx, &pos, &m, opts, fn, func() { retry = followRetry })
		if ctx.Err() != nil {
			return
		}
		d := retry.Step()
		f.s.log.WarnContext(ctx, "follow the change feed; trying again", "after", d, "error", err)
		if !sleep(ctx, d) {
			return
		}
	}
}

// follow is one connection's worth of Follow. ok is called once the feed
// has been read up to date on it.
func (f *Feed) follow(ctx context.Context, pos *int64, m *watermark, opts FollowOptions, fn func(context.Context, []Change) error, ok func()) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, err := pgx.ConnectConfig(cctx, f.s.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closing: nothing to do about it
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := f.checkBehind(ctx, pos, m); err != nil {
		return err
	}
	// OnIdle's period runs from its last call, not from the last
	// notification: a busy feed does not put it off.
	next := time.Now().Add(opts.Idle)
	read := true
	for {
		// Several notifications are read as one batch of changes; changes
		// committed while no one listened are read on the first round.
		if read {
			if err := f.catchUp(ctx, pos, m, opts, fn); err != nil {
				return err
			}
			ok()
		}
		read = true
		wctx, cancel := context.WithDeadline(ctx, next)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			// A notification carries its revision. Those of the changes
			// the last read already had (they queue up while it runs) need
			// no read: a read reaches a revision only once every change up
			// to it has committed.
			if rev, perr := strconv.ParseInt(n.Payload, 10, 64); perr == nil && rev <= *pos {
				read = false
			}
		case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
			next = time.Now().Add(opts.Idle)
			if opts.OnIdle != nil {
				if err := opts.OnIdle(ctx); err != nil && ctx.Err() == nil {
					f.s.log.WarnContext(ctx, "idle work of a change feed reader", "error", err)
				}
			}
		default:
			return fmt.Errorf("wait for a notification: %w", err)
		}
	}
}

// checkBehind moves *pos back to the feed's newest revision when the feed
// is behind it: the database lost committed writes that this follower had
// read, as after a failover to a standby that had not received them
// (asynchronous replication). The revisions after the loss are granted
// again, to other changes, and what the watermark m waited for is gone; a
// follower that waited for the old numbers would pass over every change
// until the feed caught up with them. Said
// at error level, since what was lost was acknowledged to someone.
func (f *Feed) checkBehind(ctx context.Context, pos *int64, m *watermark) error {
	rev, err := f.s.Revision(ctx)
	if err != nil {
		return fmt.Errorf("read the catalog revision: %w", err)
	}
	if rev < *pos {
		f.s.log.ErrorContext(ctx, "the change feed went back: the database lost committed writes (a failover to a standby that did not have them?); reading on from where it is",
			"read", *pos, "newest", rev)
		*pos, *m = rev, watermark{}
	}
	return nil
}

// catchUp hands fn the feed after *pos up to the watermark m keeps, a page
// at a time, moving *pos past each page fn took.
func (f *Feed) catchUp(ctx context.Context, pos *int64, m *watermark, opts FollowOptions, fn func(context.Context, []Change) error) error {
	h, err := readHorizon(ctx, f.s.pool)
	if err != nil {
		return err
	}
	upTo := m.advance(h)
	for {
		page, err := f.readUpTo(ctx, *pos, upTo, opts.Kinds, opts.Page, !opts.NamesOnly)
		if err != nil {
			return err
		}
		if len(page.Changes) > 0 {
			if err := fn(ctx, page.Changes); err != nil {
				return err
			}
		}
		*pos = max(*pos, page.UpTo)
		if len(page.Changes) < opts.Page {
			return nil
		}
	}
}

// sleep waits for d or until ctx ends; false means ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
