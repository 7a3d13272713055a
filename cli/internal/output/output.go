// Package output prints what the CLI shows: tables for people, JSON and
// YAML for scripts, all in one place so that every verb prints alike.
// Text that came from the server or a broker is made safe for a terminal
// here (Safe, SafeLine); data formats (-o json|yaml) are printed as they
// are.
package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Formats are the values of -o for objects.
var Formats = []string{"table", "json", "yaml"}

// Check refuses a format the verb does not print, naming the flag.
func Check(format string, allowed ...string) error {
	if len(allowed) == 0 {
		allowed = Formats
	}
	for _, a := range allowed {
		if format == a || (format == "" && a == "table") {
			return nil
		}
	}
	return fmt.Errorf("-o %s: this command prints %s", format, strings.Join(allowed, ", "))
}

// IsTable tells whether format asks for a table (the default).
func IsTable(format string) bool { return format == "" || format == "table" }

// Structured prints v as JSON or YAML; it returns false for "table" so the
// caller prints its table. JSON is not HTML-escaped (& stays &), and an
// empty list prints as [] in both, never null.
func Structured(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case "json":
		return true, JSON(w, v)
	case "yaml":
		raw, err := YAML(nonNil(v))
		if err != nil {
			return true, err
		}
		_, err = w.Write(raw)
		return true, err
	}
	return false, nil
}

// YAML writes v as YAML through its JSON, so that struct fields take their
// JSON names, as sigs.k8s.io/yaml does, but keeps every number's text as
// the server sent it: sigs.k8s.io/yaml reads numbers back through float64
// and YAML's own types, so 12345678901234567891 printed as
// 12345678901234567000, 1e21 as 1e+21 and 1.50 as 1.5. Long strings stay
// on one line.
func YAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent() // lists at their key's indentation, as kubectl prints them
	if err := enc.Encode(numbersAsSent(tree)); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// numbersAsSent replaces, in a decoded JSON tree, each json.Number with a
// YAML scalar of the same text, tagged as the type YAML reads it as, so
// that the encoder writes it plain: an integer when it fits 64 bits
// (signed or not), else a float.
func numbersAsSent(v any) any {
	switch t := v.(type) {
	case json.Number:
		tag := "!!float"
		if _, err := strconv.ParseInt(t.String(), 10, 64); err == nil {
			tag = "!!int"
		} else if _, err := strconv.ParseUint(t.String(), 10, 64); err == nil {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}
	case map[string]any:
		for k, x := range t {
			t[k] = numbersAsSent(x)
		}
	case []any:
		for i, x := range t {
			t[i] = numbersAsSent(x)
		}
	}
	return v
}

// JSON prints v indented, without HTML escaping.
func JSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(nonNil(v)); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// nonNil replaces nil slices in the top-level map v (a list's "items")
// with empty ones, so that no list prints as null.
func nonNil(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		if rv := reflect.ValueOf(x); x != nil && rv.Kind() == reflect.Slice && rv.IsNil() {
			x = reflect.MakeSlice(rv.Type(), 0, 0).Interface()
		}
		out[k] = x
	}
	return out
}

// Term is how standard output is shown: on a terminal (On) of Width
// columns (0 when unknown), or to a pipe or file.
type Term struct {
	On    bool
	Width int
}

// Table prints a header and rows: on a terminal, aligned columns, the last
// one cut to the terminal's width; otherwise one line per row with cells
// separated by tabs, for cut and awk. Every cell is made safe (SafeLine):
// no control character, line break or tab of a cell reaches the output.
func Table(w io.Writer, t Term, header []string, rows [][]string) error {
	clean := make([][]string, 0, len(rows)+1)
	for _, r := range append([][]string{header}, rows...) {
		c := make([]string, len(r))
		for i, cell := range r {
			c[i] = SafeLine(cell)
		}
		clean = append(clean, c)
	}
	if !t.On {
		var b strings.Builder
		for _, r := range clean {
			b.WriteString(strings.Join(r, "\t"))
			b.WriteByte('\n')
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if t.Width > 0 {
		fitLast(clean, t.Width)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for _, r := range clean {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fitLast cuts the last column of rows so that each line fits width, as
// the tabwriter will align them (padding 3), keeping at least 10 runes.
func fitLast(rows [][]string, width int) {
	if len(rows) == 0 || len(rows[0]) < 2 {
		return
	}
	n := len(rows[0])
	widths := make([]int, n-1)
	for _, r := range rows {
		for i := 0; i < n-1 && i < len(r); i++ {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	used := 0
	for _, wd := range widths {
		used += wd + 3
	}
	room := max(width-used, 10)
	for _, r := range rows {
		if len(r) == n {
			r[n-1] = Cut(r[n-1], room)
		}
	}
}

// Cut shortens s to at most n runes, ending with … when it was longer.
func Cut(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Or returns s, or dash when s is empty, so that empty cells stay visible.
func Or(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
