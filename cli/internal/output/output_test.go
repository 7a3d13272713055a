package output

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

func TestSafe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, block, line string }{
		{"plain text", "plain text", "plain text"},
		{"two\nlines\tand tab", "two\nlines\tand tab", `two\nlines\tand tab`},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`, `\x1b]0;title\x07`},
		{"over\rwrite", `over\rwrite`, `over\rwrite`},
		{"del\x7f c1\u009b bidi\u202e\u2066\u200f", `del\x7f c1\u009b bidi\u202e\u2066\u200f`, `del\x7f c1\u009b bidi\u202e\u2066\u200f`},
		{"bad \xff utf-8", `bad \xff utf-8`, `bad \xff utf-8`},
		{"日本語 é 😀", "日本語 é 😀", "日本語 é 😀"},
	} {
		if got := Safe(tc.in); got != tc.block {
			t.Errorf("Safe(%q) = %q, want %q", tc.in, got, tc.block)
		}
		if got := SafeLine(tc.in); got != tc.line {
			t.Errorf("SafeLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	rows := [][]string{{"a", "x\ty", "a long description that goes on and on"}, {"bb", "-", "short"}}
	var pipe, term bytes.Buffer
	if err := Table(&pipe, Term{}, []string{"NAME", "V", "DESCRIPTION"}, rows); err != nil {
		t.Fatal(err)
	}
	if want := "NAME\tV\tDESCRIPTION\na\tx\\ty\ta long description that goes on and on\nbb\t-\tshort\n"; pipe.String() != want {
		t.Errorf("to a pipe:\n%q\nwant\n%q", pipe.String(), want)
	}
	if err := Table(&term, Term{On: true, Width: 30}, []string{"NAME", "V", "DESCRIPTION"}, rows); err != nil {
		t.Fatal(err)
	}
	if want := "NAME   V      DESCRIPTION\na      x\\ty   a long descript…\nbb     -      short\n"; term.String() != want {
		t.Errorf("to a terminal of 30 columns:\n%s\nwant\n%s", term.String(), want)
	}
}

func TestStructured(t *testing.T) {
	t.Parallel()
	var j, y bytes.Buffer
	if _, err := Structured(&j, "json", map[string]any{"items": []string(nil), "url": "a&b<c>"}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"items\": [],\n  \"url\": \"a&b<c>\"\n}\n"; j.String() != want {
		t.Errorf("json:\n%s\nwant\n%s", j.String(), want)
	}
	if _, err := Structured(&y, "yaml", map[string]any{"items": []map[string]any(nil)}); err != nil {
		t.Fatal(err)
	}
	if y.String() != "items: []\n" {
		t.Errorf("yaml: %q", y.String())
	}
}

// TestSafeProperty: over random byte strings, what Safe and SafeLine
// return is valid UTF-8 with no character a terminal acts on (newline and
// tab only from Safe), and plain text passes unchanged.
func TestSafeProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		if r.IntN(3) == 0 {
			b = append(b, []byte(string([]rune{rune(0x2000 + r.IntN(0x80)), rune(0x80 + r.IntN(0x20))}))...)
		}
		in := string(b)
		for _, line := range []bool{false, true} {
			out := Safe(in)
			if line {
				out = SafeLine(in)
			}
			if !utf8.ValidString(out) {
				t.Fatalf("%q: invalid UTF-8 %q", in, out)
			}
			for _, c := range out {
				if (c < 0x20 && (line || (c != '\n' && c != '\t'))) || c == 0x7f || unsafeRune(c) {
					t.Fatalf("line=%v %q: %q keeps %U", line, in, out, c)
				}
			}
		}
	}
	if s := "plain text, with punctuation: ok? 100% — é"; Safe(s) != s || SafeLine(s) != s {
		t.Error("plain text changed")
	}
}
