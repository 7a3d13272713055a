package main

import (
	"math"
	"slices"
	"time"
)

// summary describes a set of measured durations.
type summary struct {
	n    int
	min  time.Duration
	mean time.Duration
	p50  time.Duration
	p99  time.Duration
}

// summarize sorts d in place and computes its summary.
func summarize(d []time.Duration) summary {
	if len(d) == 0 {
		return summary{}
	}
	slices.Sort(d)
	var total time.Duration
	for _, x := range d {
		total += x
	}
	return summary{
		n:    len(d),
		min:  d[0],
		mean: total / time.Duration(len(d)),
		p50:  percentile(d, 0.50),
		p99:  percentile(d, 0.99),
	}
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(float64(len(sorted))*p)) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// ms shows a duration in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// verdict is PASS or FAIL.
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}
