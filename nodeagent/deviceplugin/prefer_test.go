package deviceplugin

import (
	"fmt"
	"slices"
	"testing"
)

func TestPreferred(t *testing.T) {
	t.Parallel()
	// n0-*: NUMA node 0, n1-*: node 1, n2-*: node 2, x-*: no locality,
	// sick: unhealthy.
	snap := &snapshot{byID: map[string]*entry{}}
	devs := []struct {
		id   string
		numa []int64
	}{
		{"n0-a", []int64{0}}, {"n0-b", []int64{0}}, {"n0-c", []int64{0}},
		{"n1-a", []int64{1}}, {"n1-b", []int64{1}},
		{"n2-a", []int64{2}},
		{"x-a", nil}, {"x-b", []int64{0, 1}},
	}
	for i, d := range devs {
		snap.add(d.id, &entry{order: i, healthy: true, numa: d.numa})
	}
	snap.add("sick", &entry{order: len(devs), numa: []int64{1}})
	all := []string{"sick", "x-b", "x-a", "n2-a", "n1-b", "n1-a", "n0-c", "n0-b", "n0-a"}

	tests := []struct {
		available, must []string
		size            int
		want            []string
	}{
		{all, nil, 1, []string{"n2-a"}},                         // the smallest node that fits
		{all, nil, 2, []string{"n1-a", "n1-b"}},                 // ditto, keeping node 0 whole
		{all, nil, 3, []string{"n0-a", "n0-b", "n0-c"}},         // the only node that fits
		{all, nil, 4, []string{"n0-a", "n0-b", "n0-c", "n2-a"}}, // the largest, then the smallest that fits the rest
		{all, []string{"n1-b"}, 2, []string{"n1-b", "n1-a"}},
		{all, []string{"n1-b"}, 3, []string{"n1-b", "n1-a", "x-a"}}, // then no locality
		{all, []string{"n1-b"}, 5, []string{"n1-b", "n1-a", "x-a", "x-b", "n2-a"}},
		{all, []string{"x-a"}, 2, []string{"x-a", "n2-a"}},
		{all, []string{"n0-a", "n2-a"}, 4, []string{"n0-a", "n2-a", "n0-b", "n0-c"}},
		{all, []string{"n0-a", "n1-a", "n2-a"}, 2, []string{"n0-a", "n1-a", "n2-a"}}, // must-include beats size
		{[]string{"sick", "n0-a", "unknown"}, nil, 3, []string{"n0-a", "sick", "unknown"}},
		{[]string{"n0-a"}, nil, 3, []string{"n0-a"}},
		{all, nil, 0, []string{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%d", tt.must, tt.size), func(t *testing.T) {
			if got := preferred(snap, tt.available, tt.must, tt.size); !slices.Equal(got, tt.want) {
				t.Errorf("preferred(must %v, %d) = %v, want %v", tt.must, tt.size, got, tt.want)
			}
		})
	}
}
