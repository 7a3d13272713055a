package broker

import (
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		age  time.Duration
		want string
	}{
		{0, ""},
		{3900 * time.Millisecond, ""},
		{4 * time.Second, "1"},
		{10 * time.Second, "2"},
		{time.Minute, "15"},
		{time.Hour, "30"},
	} {
		if got := retryAfter(tc.age); got != tc.want {
			t.Errorf("retryAfter(%s) = %q, want %q", tc.age, got, tc.want)
		}
	}
}
