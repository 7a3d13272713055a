// Package pgtext tells whether a string can be stored in PostgreSQL's text
// and jsonb: UTF-8 without NUL characters (jsonb refuses \u0000, text refuses
// the byte, and the server refuses invalid UTF-8 in a UTF8 database). Every
// front door checks its input with it, so such input is a 400 naming the
// field, not a 500 from the database.
package pgtext

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
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
// would otherwise replace invalid bytes silently. A lone surrogate escape
// (\ud800 without its pair) is refused as well: encoding/json reads it as
// U+FFFD, but jsonb, which keeps raw documents such as parameters, refuses
// it. A document that is not JSON is left for its decoder to refuse.
func CheckJSON(prefix string, raw []byte) error {
	if !utf8.Valid(raw) {
		return &Error{Field: orBody(prefix), Problem: "is not valid UTF-8"}
	}
	marked, lone := markLoneSurrogates(raw)
	// \u0000 is the only way JSON carries a NUL (the raw byte is not JSON).
	if !lone && !strings.Contains(string(raw), `\u0000`) {
		return nil
	}
	var v any
	if err := json.Unmarshal(marked, &v); err != nil {
		return nil
	}
	err := walk(prefix, v)
	var te *Error
	if lone && errors.As(err, &te) && !strings.Contains(string(raw), `\u0000`) {
		te.Problem = loneSurrogate
	}
	return err
}

const loneSurrogate = "contains a lone UTF-16 surrogate escape (such as \\ud800 without its pair), which cannot be stored"

// markLoneSurrogates returns raw with each lone surrogate escape replaced
// by \u0000 (same length), so that walk finds its path, and whether there
// was one. A high surrogate followed by a low one is a character, and
// stays.
func markLoneSurrogates(raw []byte) ([]byte, bool) {
	var out []byte
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // an escaped character, perhaps a backslash
			continue
		}
		r := escapedRune(raw, i)
		if !utf16.IsSurrogate(r) {
			i += 5
			continue
		}
		if r < 0xdc00 && utf16.DecodeRune(r, escapedRune(raw, i+6)) != utf8.RuneError {
			i += 11 // a pair
			continue
		}
		if out == nil {
			out = bytes.Clone(raw)
		}
		copy(out[i:i+6], `\u0000`)
		i += 5
	}
	if out == nil {
		return raw, false
	}
	return out, true
}

// escapedRune is the code unit of the \uXXXX escape at raw[i:], or -1.
func escapedRune(raw []byte, i int) rune {
	if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return -1
	}
	n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(n)
}

func walk(path string, v any) error {
	return Walk(path, v, func(path string, v any) error {
		switch v := v.(type) {
		case string:
			return Check(orBody(path), v)
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if err := Check(Member(path, k), k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Walk calls visit for v, a decoded JSON document, and for every element
// and member within it, each with its path below path (path[0], path.key;
// a member of the document itself is named by its key alone), the members
// of an object in the order of their keys. It stops at the first error
// visit returns, and returns it.
func Walk(path string, v any, visit func(path string, v any) error) error {
	if err := visit(path, v); err != nil {
		return err
	}
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			if err := Walk(fmt.Sprintf("%s[%d]", path, i), e, visit); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := Walk(Member(path, k), v[k], visit); err != nil {
				return err
			}
		}
	}
	return nil
}

// Member is the path of the member key of the object at path.
func Member(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
