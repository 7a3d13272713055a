// Package pgtext tells whether a string can be stored in PostgreSQL's text
// and jsonb: UTF-8 without NUL characters (jsonb refuses \u0000, text refuses
// the byte, and the server refuses invalid UTF-8 in a UTF8 database). Every
// front door checks its input with it, so such input is a 400 naming the
// field, not a 500 from the database.
package pgtext

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Problem says what makes s unstorable, or "" when it can be stored.
func Problem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "contains a NUL character, which cannot be stored"
	}
	return ""
}

// Error is a string that cannot be stored, with its field's path.
type Error struct {
	Field   string
	Problem string
}

func (e *Error) Error() string { return e.Field + ": " + e.Problem }

// Check returns an *Error for the field when s cannot be stored.
func Check(field, s string) error {
	if p := Problem(s); p != "" {
		return &Error{Field: field, Problem: p}
	}
	return nil
}

// CheckJSON looks through a JSON document for strings (keys included) that
// cannot be stored and returns the first, by path below prefix (a.b[2].c),
// in a stable order. The raw bytes must be valid UTF-8 too: encoding/json
// would otherwise replace invalid bytes silently. A document that is not
// JSON is left for its decoder to refuse.
func CheckJSON(prefix string, raw []byte) error {
	if !utf8.Valid(raw) {
		return &Error{Field: orBody(prefix), Problem: "is not valid UTF-8"}
	}
	// \u0000 is the only way JSON carries a NUL (the raw byte is not JSON).
	if !strings.Contains(string(raw), `\u0000`) {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return walk(prefix, v)
}

func walk(path string, v any) error {
	switch v := v.(type) {
	case string:
		return Check(orBody(path), v)
	case []any:
		for i, e := range v {
			if err := walk(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if err := Check(p, k); err != nil {
				return err
			}
			if err := walk(p, v[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// ClipMark ends a string Clip cut, so a reader sees that text is missing.
const ClipMark = " …(cut)"

// Clip makes text from outside (a broker's description, an error
// message) storable and at most max bytes: invalid UTF-8 and NUL become
// U+FFFD, and a longer text is cut on a character boundary and ends with
// ClipMark (when max leaves room for it). Only the first max bytes of s
// are looked at, so a clip of megabytes costs what max does.
func Clip(s string, max int) string {
	if max <= 0 {
		return ""
	}
	if len(s) <= max && Problem(s) == "" {
		return s
	}
	cut := len(s) > max
	if cut {
		s = s[:max]
	}
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if !cut && len(s) <= max {
		return s
	}
	room := max - len(ClipMark)
	mark := ClipMark
	if room < 0 {
		room, mark = max, ""
	}
	// A character cut by the first s[:max] became U+FFFD: cut before it.
	room = min(room, len(s))
	for room > 0 && room < len(s) && !utf8.RuneStart(s[room]) {
		room--
	}
	return s[:room] + mark
}
