package roottest

import "testing"

func TestDecide(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		euid int
		ci   string
		want verdict
	}{
		{0, "", run},
		{0, "true", run},
		{1000, "", skip},
		{1000, "false", skip},
		{1000, "true", fail},
	} {
		if got := decide(tc.euid, tc.ci); got != tc.want {
			t.Errorf("decide(%d, %q) = %d, want %d", tc.euid, tc.ci, got, tc.want)
		}
	}
}
