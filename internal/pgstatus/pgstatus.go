// Package pgstatus classifies errors from PostgreSQL for the stores, which
// map them at their boundary so that no other layer looks at driver errors.
package pgstatus

import (
	"errors"
	"net"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable tells whether err means the database cannot be reached or is
// not accepting work right now (connection refused or lost, server shutting
// down or starting up), as opposed to a request it refused. Servers answer
// it with 503 and Retry-After, as their readiness already says.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgerrcode.AdminShutdown, pgerrcode.CrashShutdown, pgerrcode.CannotConnectNow:
			return true
		}
		return pgerrcode.IsConnectionException(pgErr.Code)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed)
}
