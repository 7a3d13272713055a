package jsondepth

import (
	"strings"
	"testing"
)

func TestExceeds(t *testing.T) {
	t.Parallel()
	nested := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, tc := range []struct {
		doc  string
		want bool
	}{
		{`{}`, false},
		{`1`, false},
		{nested(`{"a":`, `}`, 3), false},
		{nested(`{"a":`, `}`, 4), true},
		{nested(`[`, `]`, 4), true},
		{`[{"a":[{}]}]`, true},
		{`{"a":"[[[[[[["}`, false}, // brackets in strings are text
		{nested(`[`, ``, 5), true}, // unclosed, but too deep before the end
		{`{"a":1,"a":2}`, false},   // duplicate names are the decoder's concern
		{"[[[\"\xff\"]]]", false},  // so is invalid UTF-8
		{`{"a": nope}`, false},     // and what is no JSON
		{nested(`{"a":`, `}`, 2) + `x`, false},
	} {
		if got := Exceeds([]byte(tc.doc), 3); got != tc.want {
			t.Errorf("Exceeds(%.40q, 3) = %v, want %v", tc.doc, got, tc.want)
		}
	}
}
