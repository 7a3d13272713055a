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

// InstancePage is the statement and arguments of a page of instances as a
// list reads it, whose plan a test checks.
func InstancePage(opts ListOptions) (string, []any, error) {
	f := &filter{}
	f.scope(KindInstance, opts)
	sql, err := pageSQL(KindInstance, f, "namespace, name", nil, opts)
	return sql, f.args, err
}

// QuotaPlanIDsSQL is the statement that finds a quota's plans, whose plan
// a test checks.
const QuotaPlanIDsSQL = quotaPlanIDsSQL

// QuotaUsageSQL is the statement of QuotaUsage, whose plan a test checks.
const QuotaUsageSQL = quotaUsageSQL
