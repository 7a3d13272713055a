// Package form turns a plan's parameter schema (JSON Schema, as OSB
// brokers give it) into the fields of an HTML form, and the posted form
// back into parameters, naming the field of every problem. It knows the
// parts of JSON Schema that make a form — types, enums, defaults,
// required, nested objects, bounds — and leaves validation proper to the
// catalog, which checks the parameters against the whole schema.
package form

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Field is one input of a generated form, or a group of them (an object).
type Field struct {
	// Name is the form field's name and the path the catalog names in its
	// errors: the prefix, then the property names, joined by dots.
	Name string
	// ID is the element id, derived from Name.
	ID          string
	Label       string
	Description string
	// Type is the JSON type: string, integer, number, boolean, object or
	// array (of scalars, one per line).
	Type     string
	Enum     []string
	Required bool
	// Value is the current value as the input shows it; Checked for a
	// boolean.
	Value   string
	Checked bool
	Min     string
	Max     string
	// Secret marks a writeOnly or password-format string.
	Secret bool
	Error  string
	Fields []Field
}

// Input names the kind of control the field is shown as.
func (f Field) Input() string {
	switch {
	case f.Type == "object":
		return "group"
	case len(f.Enum) > 0:
		return "select"
	case f.Type == "boolean":
		return "checkbox"
	case f.Type == "array":
		return "lines"
	case f.Type == "integer" || f.Type == "number":
		return "number"
	case f.Secret:
		return "password"
	}
	return "text"
}

// Step is the step attribute of a number input.
func (f Field) Step() string {
	if f.Type == "integer" {
		return "1"
	}
	return "any"
}

// schema is the part of JSON Schema a form is made of.
type schema struct {
	Type        any                `json:"type"`
	Title       string             `json:"title"`
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Enum        []any              `json:"enum"`
	Default     any                `json:"default"`
	Minimum     *float64           `json:"minimum"`
	Maximum     *float64           `json:"maximum"`
	Format      string             `json:"format"`
	WriteOnly   bool               `json:"writeOnly"`
	Items       *schema            `json:"items"`
}

func (s *schema) typ() string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		// ["string", "null"] and the like: the first non-null type.
		for _, v := range t {
			if str, ok := v.(string); ok && str != "null" {
				return str
			}
		}
	}
	if s.Properties != nil {
		return "object"
	}
	if len(s.Enum) > 0 {
		return "string"
	}
	return "string"
}

func parse(raw json.RawMessage) (*schema, error) {
	s := &schema{}
	if len(raw) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("parameter schema: %w", err)
	}
	return s, nil
}

// Fields builds the fields of an object schema under prefix, filled with
// values (the current parameters, or nil for defaults) and errors (by
// field name).
func Fields(raw json.RawMessage, prefix string, values map[string]any, errs map[string]string) ([]Field, error) {
	s, err := parse(raw)
	if err != nil {
		return nil, err
	}
	return build(s, prefix, values, values != nil, errs), nil
}

func build(s *schema, prefix string, values map[string]any, given bool, errs map[string]string) []Field {
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	// Required fields first, then by name: JSON objects carry no order.
	slices.SortFunc(names, func(a, b string) int {
		ra, rb := slices.Contains(s.Required, a), slices.Contains(s.Required, b)
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	out := make([]Field, 0, len(names))
	for _, n := range names {
		p := s.Properties[n]
		if p == nil {
			p = &schema{}
		}
		name := prefix + "." + n
		f := Field{
			Name: name, ID: "f-" + strings.NewReplacer(".", "-", "_", "-").Replace(name),
			Label: p.Title, Description: p.Description, Type: p.typ(),
			Required: slices.Contains(s.Required, n), Secret: p.WriteOnly || p.Format == "password",
			Error: errs[name],
		}
		if f.Label == "" {
			f.Label = n
		}
		if p.Minimum != nil {
			f.Min = strconv.FormatFloat(*p.Minimum, 'f', -1, 64)
		}
		if p.Maximum != nil {
			f.Max = strconv.FormatFloat(*p.Maximum, 'f', -1, 64)
		}
		for _, e := range p.Enum {
			f.Enum = append(f.Enum, text(e))
		}
		v, ok := values[n]
		if !ok && !given {
			v, ok = p.Default, p.Default != nil
		}
		switch f.Type {
		case "object":
			sub, _ := v.(map[string]any)
			f.Fields = build(p, name, sub, given && sub != nil, errs)
		case "boolean":
			f.Checked = v == true
		case "array":
			if list, isList := v.([]any); isList {
				lines := make([]string, len(list))
				for i, e := range list {
					lines[i] = text(e)
				}
				f.Value = strings.Join(lines, "\n")
			}
		default:
			if ok && !f.Secret {
				f.Value = text(v)
			}
		}
		out = append(out, f)
	}
	return out
}

// text shows a JSON value as a form shows it.
func text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case json.Number:
		return t.String()
	case bool:
		return strconv.FormatBool(t)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Error is a problem with one posted field.
type Error struct {
	Field, Message string
}

// Parse reads the fields of an object schema under prefix from a posted
// form into parameters. Values that cannot have the schema's type are
// errors naming their field; so are required fields left empty. Empty
// optional fields are left out, so the broker's defaults apply.
func Parse(raw json.RawMessage, prefix string, posted url.Values) (map[string]any, []Error, error) {
	s, err := parse(raw)
	if err != nil {
		return nil, nil, err
	}
	var errs []Error
	out := read(s, prefix, posted, &errs)
	if out == nil {
		out = map[string]any{}
	}
	return out, errs, nil
}

func read(s *schema, prefix string, posted url.Values, errs *[]Error) map[string]any {
	var out map[string]any
	set := func(k string, v any) {
		if out == nil {
			out = map[string]any{}
		}
		out[k] = v
	}
	for n, p := range s.Properties {
		if p == nil {
			p = &schema{}
		}
		name := prefix + "." + n
		required := slices.Contains(s.Required, n)
		typ := p.typ()
		if typ == "object" {
			if sub := read(p, name, posted, errs); sub != nil {
				set(n, sub)
			} else if required {
				set(n, map[string]any{})
			}
			continue
		}
		if typ == "boolean" && len(p.Enum) == 0 {
			switch {
			case posted.Get(name) != "":
				set(n, true)
			case required || p.Default != nil || posted.Has(name+".present"):
				set(n, false)
			}
			continue
		}
		v := strings.TrimSpace(posted.Get(name))
		if typ == "array" {
			v = posted.Get(name)
		}
		if v == "" {
			if required {
				*errs = append(*errs, Error{name, "required"})
			}
			continue
		}
		val, msg := convert(typ, p, v)
		if msg != "" {
			*errs = append(*errs, Error{name, msg})
			continue
		}
		set(n, val)
	}
	return out
}

func convert(typ string, p *schema, v string) (any, string) {
	val, msg := convertType(typ, p, v)
	if msg != "" || len(p.Enum) == 0 || typ == "array" {
		return val, msg
	}
	// An enum's choices post the text of their value.
	for _, e := range p.Enum {
		if text(e) == v {
			return val, ""
		}
	}
	return nil, "must be one of the listed values"
}

func convertType(typ string, p *schema, v string) (any, string) {
	switch typ {
	case "integer":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, "must be a whole number"
		}
		return n, ""
	case "number":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, "must be a number"
		}
		return f, ""
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, "must be true or false"
		}
		return b, ""
	case "array":
		item := &schema{}
		if p.Items != nil {
			item = p.Items
		}
		var list []any
		for _, line := range strings.Split(v, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			e, msg := convert(item.typ(), item, line)
			if msg != "" {
				return nil, fmt.Sprintf("line %q: %s", line, msg)
			}
			list = append(list, e)
		}
		if list == nil {
			list = []any{}
		}
		return list, ""
	}
	return v, ""
}

// DescribedBy lists the ids of the field's hint and error, for
// aria-describedby.
func (f Field) DescribedBy() string {
	var ids []string
	if f.Description != "" {
		ids = append(ids, f.ID+"-hint")
	}
	if f.Error != "" {
		ids = append(ids, f.ID+"-error")
	}
	return strings.Join(ids, " ")
}
