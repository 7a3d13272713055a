package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// RelistCount is how one broker's catalogue fetches ended, counted in the
// database by whichever replica made them (migrations/catalog 0030).
type RelistCount struct {
	Namespace, Broker string
	// Stored is the fetches whose catalogue was stored; Unchanged those
	// that found the one stored last, NotModified those the broker
	// answered 304 Not Modified; Failed those that stored nothing
	// (the broker's status says why).
	Stored, Unchanged, NotModified, Failed int64
}

// RelistCounts reads the counts of every broker, for metrics.
func (s *Store) RelistCounts(ctx context.Context) ([]RelistCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT namespace, name, relists_stored, relists_unchanged, relists_not_modified, relists_failed
		FROM catalog.brokers ORDER BY namespace, name`)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RelistCount, error) {
		var c RelistCount
		return c, row.Scan(&c.Namespace, &c.Broker, &c.Stored, &c.Unchanged, &c.NotModified, &c.Failed)
	})
	return out, mapErr(err)
}
