package catalog

import (
	"fmt"
	"testing"
)

// lockKey is the second key of take_revision's advisory lock for rev, as
// pg_locks shows it (unsigned).
func lockKey(rev int64) int64 {
	k := rev%4294967296 - 2147483648
	if k < 0 {
		k += 4294967296
	}
	return k
}

func TestRevisionNear(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ last, rev int64 }{
		{0, 0}, {10, 3}, {10, 12}, {1 << 32, 1<<32 - 5}, {1 << 32, 1<<32 + 7}, {5<<32 + 17, 5<<32 - 1000}, {3, 1 << 30},
	} {
		if got := revisionNear(tc.last, lockKey(tc.rev)); got != tc.rev {
			t.Errorf("last %d, revision %d: read back %d", tc.last, tc.rev, got)
		}
	}
}

// TestWatermarkAdvance: the watermark stops below the lowest revision a
// holder has taken; a holder that has not taken one holds back everything
// handed out when it was seen, until it ends or says which it took.
func TestWatermarkAdvance(t *testing.T) {
	t.Parallel()
	var m watermark
	steps := []struct {
		h    horizon
		want int64
	}{
		{horizon{last: 10}, 10},
		{horizon{last: 15, holders: []string{"a", "b"}, taken: map[string]int64{"a": 12, "b": 14}}, 11},
		{horizon{last: 16, holders: []string{"b", "c"}, taken: map[string]int64{"b": 14, "c": 17}}, 13},
		{horizon{last: 18, holders: []string{"c", "d"}, taken: map[string]int64{"c": 17}}, 13},
		// d has taken 19 now: nothing below is held.
		{horizon{last: 20, holders: []string{"d", "e"}, taken: map[string]int64{"d": 19, "e": 20}}, 18},
		{horizon{last: 20, holders: []string{"e"}, taken: map[string]int64{"e": 20}}, 19},
		{horizon{last: 21}, 21},
	}
	for i, st := range steps {
		if got := m.advance(st.h); got != st.want {
			t.Fatalf("step %d (%s): watermark %d, want %d", i, fmt.Sprint(st.h), got, st.want)
		}
	}
}
