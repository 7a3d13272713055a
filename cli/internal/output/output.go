// Package output prints what the CLI shows: tables for people, JSON and
// YAML for scripts, all in one place so that every verb prints alike.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Formats are the values of -o.
var Formats = []string{"table", "json", "yaml"}

// Check refuses a format the CLI does not know, naming the flag.
func Check(format string, allowed ...string) error {
	if len(allowed) == 0 {
		allowed = Formats
	}
	for _, a := range allowed {
		if format == a || (format == "" && a == "table") {
			return nil
		}
	}
	return fmt.Errorf("-o %q: want one of %s", format, strings.Join(allowed, ", "))
}

// IsTable tells whether format asks for a table (the default).
func IsTable(format string) bool { return format == "" || format == "table" }

// Structured prints v as JSON or YAML; it returns false for "table" so the
// caller prints its table.
func Structured(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case "yaml":
		raw, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(raw)
		return true, err
	}
	return false, nil
}

// Table prints aligned columns with a header.
func Table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i := range r {
			r[i] = strings.ReplaceAll(strings.ReplaceAll(r[i], "\t", " "), "\n", " ")
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// Or returns s, or dash when s is empty, so that empty cells stay visible.
func Or(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
