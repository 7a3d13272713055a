package pgtext

import "testing"

func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		doc, field string
	}{
		{`{"a":"ok","b":[1,"x"]}`, ""},
		{`{"a":"\u0000"}`, "a"},
		{`{"a":{"b":["ok","x\u0000y"]}}`, "a.b[1]"},
		{`{"k\u0000":1}`, "k\x00"},
		{"{\"a\":\"\xff\"}", "body"},
		{`{"a":"\\u0000"}`, ""}, // an escaped backslash: no NUL
		{`not json \u0000`, ""}, // left to the decoder
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
	if Problem("a\x00") == "" || Problem("\xc3") == "" || Problem("ünïcode") != "" {
		t.Error("Problem")
	}
}
