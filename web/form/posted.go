package form

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/message"
)

// Posted is a form as it was posted: its values and its problems, by the
// name of the input each belongs to. A handler reads it once and stays
// linear, as miniflux's internal/ui/form handlers do: read the fields,
// check what only the page knows (Add), build what it asks the catalog
// for, hand the catalog's validation errors back (Absorb); while there
// are problems it shows the form again, refilled (Fields), each problem
// next to its input and the rest above the form (Other).
//
// Text that PostgreSQL could not hold (the web package's input middleware
// finds it) is a problem of its field from the start, reaches nothing,
// and is never shown back.
type Posted struct {
	values url.Values
	// Problems by input name; the first found for an input is kept.
	Problems map[string]string
	// unstorable are the inputs whose text could not be stored.
	unstorable map[string]bool
}

// Read takes a posted form, and the problems of its unstorable fields by
// name.
func Read(values url.Values, unstorable map[string]string) *Posted {
	p := &Posted{values: values, Problems: map[string]string{}, unstorable: map[string]bool{}}
	for name, problem := range unstorable {
		p.Problems[name], p.unstorable[name] = problem, true
	}
	return p
}

// Value is an input's value without surrounding spaces; "" when it was
// not posted or could not be stored.
func (p *Posted) Value(name string) string {
	return strings.TrimSpace(p.Secret(name))
}

// Secret is an input's value as typed (a password keeps its spaces);
// "" when it could not be stored.
func (p *Posted) Secret(name string) string {
	if p.unstorable[name] {
		return ""
	}
	return p.values.Get(name)
}

// Add records a problem of an input, unless it has one already.
func (p *Posted) Add(name, problem string) {
	if _, ok := p.Problems[name]; !ok {
		p.Problems[name] = problem
	}
}

// OK tells whether the form has no problem so far.
func (p *Posted) OK() bool { return len(p.Problems) == 0 }

// Absorb takes a catalog validation error into the form: each field error
// becomes a problem of the input that field names (field maps the
// catalog's field path to an input's name; nil keeps the path, as
// generated parameter inputs are named by it). It reports whether err was
// a validation error; any other error is the caller's.
func (p *Posted) Absorb(err error, field func(path string) string) bool {
	v, ok := catalog.AsValidation(err)
	if !ok {
		return false
	}
	for _, fe := range v.Errors {
		name := fe.Field
		if field != nil {
			name = field(fe.Field)
		}
		p.Add(name, catalog.FieldMessage(fe))
	}
	return true
}

// Parameters reads a plan's parameters from the inputs generated from its
// schema under prefix (see Parse); the inputs' problems become the
// form's.
func (p *Posted) Parameters(schema json.RawMessage, prefix string) (json.RawMessage, error) {
	params, errs, err := Parse(schema, prefix, p.values)
	if err != nil {
		return nil, err
	}
	for _, e := range errs {
		p.Add(e.Field, e.Message)
	}
	if len(params) == 0 {
		return nil, nil
	}
	return json.Marshal(params)
}

// Fields are the inputs generated from schema under prefix, filled with
// what was posted and showing their problems; unstorable text is left
// out.
func (p *Posted) Fields(schema json.RawMessage, prefix string) ([]Field, error) {
	fields, err := Refill(schema, prefix, p.values, p.Problems)
	if err != nil {
		return nil, err
	}
	p.blank(fields)
	return fields, nil
}

func (p *Posted) blank(fields []Field) {
	for i := range fields {
		if p.unstorable[fields[i].Name] {
			fields[i].Value = ""
		}
		p.blank(fields[i].Fields)
		for j := range fields[i].Alternatives {
			p.blank(fields[i].Alternatives[j].Fields)
		}
	}
}

// Other lists, sorted, the problems of inputs that are not among shown,
// for the page to show above the form: the catalog's as it words them
// (naming their field), the others after their field's name in words.
func (p *Posted) Other(shown ...string) []string {
	var out []string
	for name, problem := range p.Problems {
		if slices.Contains(shown, name) {
			continue
		}
		if !isSentence(problem) {
			problem = message.Capitalise(message.Field(printable(name))) + ": " + problem
		}
		out = append(out, problem)
	}
	slices.Sort(out)
	return out
}

// isSentence tells whether a problem is worded as a sentence already (the
// catalog's are): a capital first letter and a full stop.
func isSentence(s string) bool {
	return s != "" && unicode.IsUpper([]rune(s)[0]) && strings.HasSuffix(s, ".")
}

// printable is s with invalid UTF-8 and NUL characters made visible.
func printable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\0`)
}
