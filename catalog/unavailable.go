package catalog

import "github.com/bindery-dev/bindery/internal/pgstatus"

// IsUnavailable tells whether err means the database cannot be reached or
// is not accepting work right now, as opposed to a request it refused.
// Front doors answer it with 503 and Retry-After.
func IsUnavailable(err error) bool { return pgstatus.Unavailable(err) }
