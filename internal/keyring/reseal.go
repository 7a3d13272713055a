package keyring

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Column is a table's column of sealed values: Table.Sealed, keyed by
// Table.ID, each sealed with the associated data AAD gives for its row's
// key.
type Column struct {
	Table, ID, Sealed string
	AAD               func(id string) []byte
}

// DB is a database's pool (a pgxpool.Pool).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ResealStore re-seals with the first key the values of a store's
// columns (Reseal), then its canary (named aad, in the column canary),
// so that the older keys can be dropped. The canary is re-sealed only
// when no value sealed with an older key is left: one written meanwhile
// by a process that does not have the new key first makes it fail, and it
// can be run again. It returns how many values (the canary aside) it
// sealed again.
func (k *Keyring) ResealStore(ctx context.Context, db DB, canary Column, cols ...Column) (int, error) {
	done, left := 0, 0
	for _, col := range cols {
		n, err := k.Reseal(ctx, db, col)
		done += n
		if err != nil {
			return done, err
		}
		n, err = k.Remaining(ctx, db, col)
		if err != nil {
			return done, err
		}
		left += n
	}
	if left > 0 {
		return done, fmt.Errorf("%d values were sealed with an older key while this ran: give every process key %s first and run it again",
			left, k.Fingerprints()[0])
	}
	_, err := k.Reseal(ctx, db, canary)
	return done, err
}

// resealBatch is how many rows one transaction of Reseal locks and
// rewrites.
const resealBatch = 500

// Reseal seals again, with the first key, every value of col sealed with
// another key of the ring, a batch of rows at a time, each batch in a
// transaction that locks its rows: a write of the same row waits for it,
// and one after it seals with the first key anyway. It returns how many
// values it sealed again. Run again, it finds none: what it leaves is
// only what was written with another key meanwhile (Remaining).
func (k *Keyring) Reseal(ctx context.Context, db DB, col Column) (int, error) {
	done, after := 0, ""
	for {
		n, last, err := k.resealBatch(ctx, db, col, after)
		done += n
		if err != nil || last == "" {
			return done, err
		}
		after = last
	}
}

// resealBatch re-seals the rows of one batch after the key after ("" for
// the first batch); it returns how many it re-sealed and the last key it
// read ("" when the column is done).
func (k *Keyring) resealBatch(ctx context.Context, db DB, col Column, after string) (int, string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("re-seal %s.%s: %w", col.Table, col.Sealed, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q := fmt.Sprintf(`SELECT %[1]s::text, %[2]s FROM %[3]s WHERE %[2]s IS NOT NULL`, col.ID, col.Sealed, col.Table)
	var args []any
	if after != "" {
		q, args = q+fmt.Sprintf(` AND %s > $1`, col.ID), []any{after}
	}
	rows, err := tx.Query(ctx, q+fmt.Sprintf(` ORDER BY %s LIMIT %d FOR UPDATE`, col.ID, resealBatch), args...)
	if err != nil {
		return 0, "", fmt.Errorf("re-seal %s.%s: %w", col.Table, col.Sealed, err)
	}
	var ids []string
	var values [][]byte
	var id string
	var sealed []byte
	if _, err := pgx.ForEachRow(rows, []any{&id, &sealed}, func() error {
		ids, values = append(ids, id), append(values, sealed)
		return nil
	}); err != nil {
		return 0, "", fmt.Errorf("re-seal %s.%s: %w", col.Table, col.Sealed, err)
	}
	if len(ids) == 0 {
		return 0, "", nil
	}
	b := &pgx.Batch{}
	update := fmt.Sprintf(`UPDATE %s SET %s = $2 WHERE %s = $1`, col.Table, col.Sealed, col.ID)
	for i, id := range ids {
		if fp, ok := SealedWith(values[i]); ok && fp == k.Fingerprints()[0] {
			continue
		}
		plain, err := k.Open(values[i], col.AAD(id))
		if err != nil {
			return 0, "", fmt.Errorf("re-seal %s.%s of %s: %w", col.Table, col.Sealed, id, k.wrongKeys(col.Table, values[i]))
		}
		b.Queue(update, id, k.Seal(plain, col.AAD(id)))
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return 0, "", fmt.Errorf("re-seal %s.%s: %w", col.Table, col.Sealed, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, "", fmt.Errorf("re-seal %s.%s: %w", col.Table, col.Sealed, err)
	}
	return b.Len(), ids[len(ids)-1], nil
}

// Remaining counts the values of col sealed with a key other than the
// first.
func (k *Keyring) Remaining(ctx context.Context, db DB, col Column) (int, error) {
	var n int
	err := db.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s IS NOT NULL AND substring(%[2]s FROM 2 FOR %d) <> $1`,
		col.Table, col.Sealed, idLen), k.keys[0].id[:]).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count %s.%s sealed with older keys: %w", col.Table, col.Sealed, err)
	}
	return n, nil
}

// Prefixed is the associated data of rows sealed with prefix+id.
func Prefixed(prefix string) func(string) []byte {
	return func(id string) []byte { return []byte(prefix + id) }
}

// Fixed is the associated data of a row sealed with aad whatever its key
// (a canary's).
func Fixed(aad string) func(string) []byte {
	return func(string) []byte { return []byte(aad) }
}
