package serve

import "time"

// SetIdleTimeout shortens how long Run keeps an idle connection, for a
// test, and returns what puts it back.
func SetIdleTimeout(d time.Duration) (restore func()) {
	old := idleTimeout
	idleTimeout = d
	return func() { idleTimeout = old }
}
