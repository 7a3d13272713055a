package catalog

import "time"

// SetLegacyLinger sets how long c takes per-object claims after it last
// saw an earlier release's (legacyLinger).
func SetLegacyLinger(c *Claimer, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.linger, c.legacyUntil = d, time.Time{}
}

// FeedAtSQL is the statement of Feed.At, whose plan a test checks.
const FeedAtSQL = feedAtSQL
