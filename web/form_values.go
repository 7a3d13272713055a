package web

import (
	"slices"

	"github.com/bindery-dev/bindery/web/form"
)

// otherErrors lists the errors whose field the form does not show.
func otherErrors(errs map[string]string, shown []string) []string {
	var out []string
	for f, m := range errs {
		if !slices.Contains(shown, f) {
			out = append(out, printable(f)+": "+m)
		}
	}
	slices.Sort(out)
	return out
}

// blankProblems empties the inputs whose posted text could not be stored,
// so that a form shown again does not carry it back.
func blankProblems(fields []form.Field, problems map[string]string) {
	for i := range fields {
		if problems[fields[i].Name] != "" {
			fields[i].Value = ""
		}
		blankProblems(fields[i].Fields, problems)
		for j := range fields[i].Alternatives {
			blankProblems(fields[i].Alternatives[j].Fields, problems)
		}
	}
}
