package output

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text from the server is written by others — brokers, some of them third
// parties, and whoever named an object — and a terminal acts on what it
// is sent: ESC sequences set the window title, clear the screen, forge
// hyperlinks or rewrite what was printed; CR returns to the start of the
// line and overprints it; Unicode's bidirectional controls reorder what is
// shown. Safe and SafeLine show every such character visibly instead, as
// an escape a person can read (\x1b, \r, \u202e), whether standard output
// is a terminal or a pipe (a pipe's file is often shown on a terminal
// later). Data formats (-o json, -o yaml, credentials) are never passed
// through them: there the consumer decodes what was escaped.

// Safe makes text safe to show as a block: newlines and tabs are kept,
// every other control character is shown as an escape.
func Safe(s string) string { return sanitize(s, true) }

// SafeLine makes text safe to show on one line or in one table cell: as
// Safe, and newlines and tabs are shown as \n and \t too.
func SafeLine(s string) string { return sanitize(s, false) }

func sanitize(s string, block bool) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && block, r == '\t' && block:
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// isPlain tells whether s needs no change: printable ASCII only, the
// common case, checked without allocating.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// unsafeRune reports the non-ASCII characters a terminal acts on: the C1
// controls (U+0080–U+009F, CSI among them), the bidirectional embeddings,
// overrides and isolates (U+202A–U+202E, U+2066–U+2069) and marks
// (U+200E, U+200F, U+061C), and the line and paragraph separators.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}
