package controller

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", 600) // 1,200 bytes
	for _, tc := range []struct {
		in   string
		n    int
		want int // length in bytes of the result
	}{
		{"short", 1024, 5},
		{strings.Repeat("a", 1024), 1024, 1024},
		{strings.Repeat("a", 1025), 1024, 1024},
		{long, 1024, 1023}, // é is 2 bytes: the cut moves back to a rune start
	} {
		got := truncate(tc.in, tc.n)
		if len(got) != tc.want || !utf8.ValidString(got) || len(got) > tc.n {
			t.Errorf("truncate(%d bytes, %d): %d bytes, valid %v; want %d", len(tc.in), tc.n, len(got), utf8.ValidString(got), tc.want)
		}
	}
}
