package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// Pruning: the broker keeps one row per operation, and platforms send
// operations without end — every provision, bind and unbind, failed ones
// and repeated ones too — so the rows are pruned: every operation
// finished more than the retention ago (DefaultOperationRetention, far
// past any operation's deadline and a platform's polling of it), except
// the newest of an instance or binding that still exists, which
// last_operation answers from; and, however young, every finished
// operation of an instance or binding past its operationsKept newest, so
// one platform churning one binding does not fill the table within the
// retention. River's own job rows have River's retention.

// DefaultOperationRetention is how long finished operations are kept by
// default: as long as River keeps the jobs it gave up.
const DefaultOperationRetention = 7 * 24 * time.Hour

const (
	// operationsKept is how many operations of one instance or binding
	// are kept at most.
	operationsKept = 16
	// pruneEvery is how often the broker prunes operations, and
	// pruneBatch how many rows one statement deletes, so no transaction
	// holds many locks or runs long.
	pruneEvery = time.Hour
	pruneBatch = 5000
)

// pruneArgs is the River job that prunes operations.
type pruneArgs struct{}

// Kind names the job in River's tables.
func (pruneArgs) Kind() string { return "bindery_broker_prune_operations" }

type pruneWorker struct {
	river.WorkerDefaults[pruneArgs]
	b *Broker
}

// Work prunes; an error makes River retry with its backoff, and the next
// round comes anyway.
func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[pruneArgs]) error {
	n, err := w.b.PruneOperations(ctx)
	if n > 0 {
		w.b.log.DebugContext(ctx, "pruned operations", "operations", n)
	}
	return err
}

// pruneJob runs the pruning every pruneEvery, and once when a process
// becomes River's leader: periodic jobs run on the leader only, so one
// replica prunes at a time.
func pruneJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(pruneEvery), func() (river.JobArgs, *river.InsertOpts) {
		return pruneArgs{}, &river.InsertOpts{MaxAttempts: 3}
	}, &river.PeriodicJobOpts{ID: pruneArgs{}.Kind(), RunOnStart: true})
}

// PruneOperations removes the operations that are no longer kept (see
// DefaultOperationRetention) and says how many it removed.
func (b *Broker) PruneOperations(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := pruneOperations(ctx, b.pool, b.opRetention, operationsKept, pruneBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune operations: %w", err)
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}
