package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// queryCounter is a pgx tracer that counts the queries of a pool and the
// time they take, to show how much of Bindery's time is its own
// bookkeeping in its database.
type queryCounter struct {
	queries atomic.Int64
	nanos   atomic.Int64
}

var _ pgx.QueryTracer = (*queryCounter)(nil)

type queryStartKey struct{}

// TraceQueryStart notes when a query starts.
func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, queryStartKey{}, time.Now())
}

// TraceQueryEnd counts the query and its time.
func (q *queryCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	start, ok := ctx.Value(queryStartKey{}).(time.Time)
	if !ok {
		return
	}
	q.queries.Add(1)
	q.nanos.Add(int64(time.Since(start)))
}

// snapshot returns the counts so far.
func (q *queryCounter) snapshot() (int64, time.Duration) {
	return q.queries.Load(), time.Duration(q.nanos.Load())
}
