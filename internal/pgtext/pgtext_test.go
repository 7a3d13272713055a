package pgtext

import (
	"strings"
	"testing"
)

func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		doc, field string
	}{
		{`{"a":"ok","b":[1,"x"]}`, ""},
		{`{"a":"\u0000"}`, "a"},
		{`{"a":{"b":["ok","x\u0000y"]}}`, "a.b[1]"},
		{`{"k\u0000":1}`, "k\x00"},
		{"{\"a\":\"\xff\"}", "body"},
		{`{"a":"\\u0000"}`, ""},                  // an escaped backslash: no NUL
		{`not json \u0000`, ""},                  // left to the decoder
		{`{"a":"ok","p":{"x":"\ud800"}}`, "p.x"}, // a lone high surrogate
		{`{"a":["\udc00x"]}`, "a[0]"},            // a lone low surrogate
		{`{"a":"\ud83d\ude00 \\ud800"}`, ""},     // a pair, and an escaped backslash
		{`{"a":"\ud800\u0041"}`, "a"},            // a high surrogate before no low one
	} {
		err := CheckJSON("", []byte(tc.doc))
		got := ""
		if e, ok := err.(*Error); ok {
			got = e.Field
		}
		if got != tc.field {
			t.Errorf("%q: field %q (%v), want %q", tc.doc, got, err, tc.field)
		}
	}
	if err := CheckJSON("spec", []byte(`{"x":"\ud800"}`)); err == nil || !strings.Contains(err.Error(), "spec.x: contains a lone UTF-16 surrogate") {
		t.Errorf("lone surrogate: %v", err)
	}
	if Problem("a\x00") == "" || Problem("\xc3") == "" || Problem("ünïcode") != "" {
		t.Error("Problem")
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 600) // 1,200 bytes
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"short", "fine", 10, "fine"},
		{"exact", "0123456789", 10, "0123456789"},
		{"cut", "0123456789abcdefghijklmnopqrstuvwxyz", 30, "0123456789abcdefghijklmnopqrstuvwxyz"[:30-len(ClipMark)] + ClipMark},
		{"rune boundary", long, 100, long[:(100-len(ClipMark))/2*2] + ClipMark},
		{"NUL", "a\x00b", 10, "a\uFFFDb"},
		{"invalid", "a\xffb", 10, "a\uFFFDb"},
		{"invalid and cut", strings.Repeat("\xff", 100), 40, "\uFFFD" + ClipMark},
		{"tiny max", "0123456789", 3, "012"},
	} {
		got := Clip(tc.in, tc.max)
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if len(got) > tc.max || Problem(got) != "" {
			t.Errorf("%s: %d bytes (max %d), problem %q", tc.name, len(got), tc.max, Problem(got))
		}
	}
}

func FuzzClip(f *testing.F) {
	f.Add("hello", 3)
	f.Add("\xffé\x00", 7)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n%2048 + 1
		if n < 0 {
			n = -n
		}
		got := Clip(s, n)
		if len(got) > n || Problem(got) != "" {
			t.Fatalf("Clip(%q, %d) = %q", s, n, got)
		}
		if len(s) <= n && Problem(s) == "" && got != s {
			t.Fatalf("Clip(%q, %d) changed a storable short string: %q", s, n, got)
		}
	})
}
