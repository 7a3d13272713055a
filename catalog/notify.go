package catalog

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// Writes announce their revisions on NotifyChannel after they commit,
// not inside their transactions: a notifying commit takes PostgreSQL's
// lock that orders every notifying commit (and, with synchronous_commit
// on, holds it through its WAL flush), and wakes every listener once per
// write. A store sends one notification at a time, of the newest revision
// committed: those committed while one is on its way go together in the
// next, so that under load a notification announces many writes, and the
// readers of the feed read once for all of them.

// notifyTimeout bounds sending one notification.
const notifyTimeout = 10 * time.Second

// notifier sends a store's notifications, one at a time.
type notifier struct {
	s       *Store
	mu      sync.Mutex
	pending int64 // the newest revision committed and not yet announced
	sending bool
}

// announce has the revision rev, committed, announced soon; it does not
// wait.
func (n *notifier) announce(rev int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pending = max(n.pending, rev)
	if !n.sending {
		n.sending = true
		go n.send()
	}
}

// send announces the pending revision until none is left. A failed
// notification only delays readers, which read the feed every few
// seconds without one.
func (n *notifier) send() {
	for {
		n.mu.Lock()
		rev := n.pending
		n.pending = 0
		if rev == 0 {
			n.sending = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		if _, err := n.s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, strconv.FormatInt(rev, 10)); err != nil {
			n.s.log.Warn("announce a revision of the catalog", "revision", rev, "error", err)
		}
		cancel()
	}
}
