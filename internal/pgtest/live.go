package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// LiveBytes is the live data of each table of schema in pool's database,
// by table name: the bytes of the live row versions of the table, of its
// TOAST table and of their indexes, as pgstattuple counts them (dead row
// versions and free space left out; no VACUUM needed, and file sizes,
// which VACUUM does not shrink, are not used). It installs the
// pgstattuple extension (PostgreSQL's contrib) in the database.
func LiveBytes(tb testing.TB, pool *pgxpool.Pool, schema string) map[string]int64 {
	tb.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pgstattuple`); err != nil {
		tb.Fatalf("pgtest: pgstattuple (PostgreSQL's contrib): %v", err)
	}
	rows, err := pool.Query(ctx, `SELECT c.relname, (
			SELECT sum((pgstattuple(r.oid)).tuple_len) FROM pg_class r
			WHERE r.oid IN (c.oid, c.reltoastrelid)
			   OR r.oid IN (SELECT indexrelid FROM pg_index i JOIN pg_class ir ON ir.oid = i.indexrelid
			                WHERE i.indrelid IN (c.oid, c.reltoastrelid) AND ir.relam = (SELECT oid FROM pg_am WHERE amname = 'btree')))::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r'`, schema)
	if err != nil {
		tb.Fatalf("pgtest: live bytes: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			tb.Fatalf("pgtest: live bytes: %v", err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("pgtest: live bytes: %v", err)
	}
	return out
}
