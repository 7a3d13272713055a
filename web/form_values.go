package web

import (
	"net/url"
	"slices"
	"strings"

	"github.com/bindery-dev/bindery/web/form"
)

// formValues turns posted fields back into a tree of strings, for showing
// a form again as it was typed.
func formValues(posted url.Values) map[string]any { return valuesUnder(posted, paramsPrefix) }

// bindValues is formValues for the bind form.
func bindValues(posted url.Values) map[string]any { return valuesUnder(posted, bindPrefix) }

func valuesUnder(posted url.Values, prefix string) map[string]any {
	root := map[string]any{}
	for k, vs := range posted {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok || len(vs) == 0 {
			continue
		}
		parts := strings.Split(rest, ".")
		m := root
		for _, p := range parts[:len(parts)-1] {
			sub, _ := m[p].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		var v any = vs[0]
		if vs[0] == "on" || vs[0] == "true" {
			v = true
		}
		m[parts[len(parts)-1]] = v
	}
	return root
}

// flatNames lists the names of every input of a form.
func flatNames(fields []form.Field) []string {
	var out []string
	for _, f := range fields {
		out = append(out, f.Name)
		out = append(out, flatNames(f.Fields)...)
	}
	return out
}

// otherErrors lists the errors whose field the form does not show.
func otherErrors(errs map[string]string, shown []string) []string {
	var out []string
	for f, m := range errs {
		if !slices.Contains(shown, f) {
			out = append(out, f+": "+m)
		}
	}
	slices.Sort(out)
	return out
}
