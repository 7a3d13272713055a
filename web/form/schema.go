// Package form turns a plan's parameter schema (JSON Schema, as OSB
// brokers give it) into the fields of an HTML form, and the posted form
// back into parameters, naming the field of every problem.
//
// The schema is compiled by the JSON Schema library the catalog validates
// with (santhosh-tekuri/jsonschema, through internal/params), which resolves
// every $ref; this package only reads the compiled keywords that make a
// form — types, enums and consts, defaults, required, nested objects,
// bounds, allOf, and oneOf/anyOf as a choice between alternatives — and
// asks the library which alternative a value matches. Validation proper is
// left to the catalog, which checks the parameters against the whole
// schema.
package form

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/bindery-dev/bindery/internal/params"
)

// Field is one input of a generated form, a group of them (an object), a
// choice between alternatives (oneOf, anyOf), or the notice that a form
// stops there.
type Field struct {
	// Name is the input's name, unique in the form: the prefix, then the
	// property names, joined by dots; an alternative's inputs add "~N"
	// (its index) to the choice's name, and the choice's radio buttons are
	// named after the choice with "~".
	Name string
	// Path is where the value goes in the parameters, as the catalog names
	// it in its errors: Name without the alternatives' marks.
	Path string
	// ID is the element id, derived from Name.
	ID          string
	Label       string
	Description string
	// Type is the JSON type: string, integer, number, boolean, object or
	// array (of scalars, one per line); "choice" for oneOf and anyOf,
	// "const" for a value the schema fixes, "more" for the notice where a
	// form stops, its budget spent (MaxFields; the notice is Description).
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
	// Alternatives are a choice's options, one of them Chosen; AnyOf says
	// the schema would accept several at once (the form offers one).
	Alternatives []Alternative
	AnyOf        bool
}

// Alternative is one option of a choice: its label and its inputs.
type Alternative struct {
	Index  int
	ID     string
	Label  string
	Chosen bool
	Fields []Field
}

// Input names the kind of control the field is shown as.
func (f Field) Input() string {
	switch {
	case f.Type == "choice":
		return "choice"
	case f.Type == "const":
		return "const"
	case f.Type == "more":
		return "more"
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

// ChoiceName is the name of a choice's radio buttons.
func (f Field) ChoiceName() string { return f.Name + choiceMark }

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

// choiceMark separates a choice's name from the index of an alternative.
const choiceMark = "~"

// maxDepth bounds how deep a form goes: a schema may refer to itself.
const maxDepth = 8

// MaxFields bounds how many fields, groups, choices and alternatives one
// form generates. maxDepth bounds depth, not width: a schema of 171 bytes
// whose object refers to itself from four properties made a form of
// 349,524 inputs, 9 s and 2 GB to build, and one of six properties more
// memory than the server had. A form stops where the budget runs out, and
// says that the rest is to be given as JSON.
const MaxFields = 500

// moreNotice is what a form that stopped says where it stops.
var moreNotice = fmt.Sprintf("The schema has more parameters than a form shows (%d fields): "+
	"give the others as JSON, through the REST API or the CLI's --params-json.", MaxFields)

// compiled keeps compiled schemas by their text: a plan's schema is read
// on every form of it, and compiling costs more than the page.
var compiled struct {
	sync.Mutex
	m map[string]*schema
}

// schema is a compiled schema with its document, where the annotations
// the compiler does not keep (format, when formats are not asserted) are
// read at each compiled schema's location.
type schema struct {
	root *jsonschema.Schema
	doc  any
}

func compile(raw json.RawMessage) (*schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	key := string(raw)
	compiled.Lock()
	s, ok := compiled.m[key]
	compiled.Unlock()
	if ok {
		return s, nil
	}
	p, err := params.Compile(raw, false)
	if err != nil {
		return nil, fmt.Errorf("parameter schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parameter schema: %w", err)
	}
	s = &schema{root: p.Compiled(), doc: doc}
	compiled.Lock()
	defer compiled.Unlock()
	if compiled.m == nil || len(compiled.m) >= 1024 {
		compiled.m = map[string]*schema{}
	}
	compiled.m[key] = s
	return s, nil
}

// keyword reads the keyword of the schema object at a compiled schema's
// location (a JSON pointer after '#'), or nil.
func (s *schema) keyword(at *jsonschema.Schema, name string) any {
	_, ptr, _ := strings.Cut(at.Location, "#")
	v := s.doc
	if ptr != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			tok, err := url.PathUnescape(tok)
			if err != nil {
				return nil
			}
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
			switch t := v.(type) {
			case map[string]any:
				v = t[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(t) {
					return nil
				}
				v = t[i]
			default:
				return nil
			}
		}
	}
	obj, _ := v.(map[string]any)
	return obj[name]
}

// node is what a form needs of one place in a schema: the keywords of the
// schema there, of what its $ref names and of its allOf, the first found
// winning for single values, properties and required names united.
type node struct {
	sc *schema
	// at is the schema itself, which values are validated against.
	at          *jsonschema.Schema
	types       []string
	title       string
	description string
	def         *any
	enum        []any
	konst       *any
	min, max    *big.Rat
	format      string
	writeOnly   bool
	props       map[string]*jsonschema.Schema
	// sharedProps says props is a compiled schema's own map, which a
	// second schema's properties must not be added to.
	sharedProps bool
	required    []string
	alts        []*jsonschema.Schema
	anyOf       bool
	items       *jsonschema.Schema
}

func (sc *schema) view(s *jsonschema.Schema) *node {
	n := &node{sc: sc, at: s}
	seen := map[*jsonschema.Schema]bool{}
	var add func(s *jsonschema.Schema)
	add = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		if s.Types != nil && n.types == nil {
			for _, t := range s.Types.ToStrings() {
				if t != "null" {
					n.types = append(n.types, t)
				}
			}
		}
		if n.title == "" {
			n.title = s.Title
		}
		if n.description == "" {
			n.description = s.Description
		}
		if n.def == nil {
			n.def = s.Default
		}
		if s.Enum != nil && n.enum == nil {
			n.enum = s.Enum.Values
		}
		if n.konst == nil {
			n.konst = s.Const
		}
		if n.min == nil {
			n.min = s.Minimum
		}
		if n.max == nil {
			n.max = s.Maximum
		}
		if f, ok := sc.keyword(s, "format").(string); ok && n.format == "" {
			n.format = f
		}
		n.writeOnly = n.writeOnly || s.WriteOnly
		n.addProps(s.Properties)
		for _, r := range s.Required {
			if !slices.Contains(n.required, r) {
				n.required = append(n.required, r)
			}
		}
		if n.alts == nil {
			switch {
			case len(s.OneOf) > 0:
				n.alts = s.OneOf
			case len(s.AnyOf) > 0:
				n.alts, n.anyOf = s.AnyOf, true
			}
		}
		if n.items == nil {
			n.items = itemsOf(s)
		}
		add(s.Ref)
		for _, a := range s.AllOf {
			add(a)
		}
	}
	add(s)
	return n
}

// addProps adds properties to the node's, those it has winning. The
// first map added is shared, not copied (a node's props are never
// changed): a form views a schema once a field, and copying a wide
// object's properties each time made a form of a 28 kB schema cost
// 180 ms.
func (n *node) addProps(props map[string]*jsonschema.Schema) {
	switch {
	case len(props) == 0:
	case n.props == nil:
		n.props, n.sharedProps = props, true
	default:
		if n.sharedProps {
			n.props, n.sharedProps = maps.Clone(n.props), false
		}
		for k, p := range props {
			if _, ok := n.props[k]; !ok {
				n.props[k] = p
			}
		}
	}
}

// itemsOf is the schema of an array's items, whichever draft's keyword
// gives it.
func itemsOf(s *jsonschema.Schema) *jsonschema.Schema {
	if s.Items2020 != nil {
		return s.Items2020
	}
	if it, ok := s.Items.(*jsonschema.Schema); ok {
		return it
	}
	return nil
}

// alternative is alternative i of a choice: the keywords around the
// choice (the properties every alternative shares) with the alternative's
// own, which win.
func (n *node) alternative(i int) *node {
	a := n.sc.view(n.alts[i])
	m := *n
	m.alts, m.anyOf = nil, false
	m.props, m.sharedProps = map[string]*jsonschema.Schema{}, false
	for k, p := range n.props {
		m.props[k] = p
	}
	for k, p := range a.props {
		m.props[k] = p
	}
	m.required = slices.Clone(n.required)
	for _, r := range a.required {
		if !slices.Contains(m.required, r) {
			m.required = append(m.required, r)
		}
	}
	if a.types != nil {
		m.types = a.types
	}
	m.enum, m.konst, m.items = a.enum, a.konst, a.items
	if a.min != nil {
		m.min = a.min
	}
	if a.max != nil {
		m.max = a.max
	}
	if a.format != "" {
		m.format = a.format
	}
	m.writeOnly = n.writeOnly || a.writeOnly
	if a.def != nil {
		m.def = a.def
	}
	if a.alts != nil {
		m.alts, m.anyOf = a.alts, a.anyOf
	}
	return &m
}

// label names alternative i for a person: its title, else the value its
// schema fixes for a property (a discriminator such as "kind": "s3"), else
// the name of the definition it refers to, else its type.
func (n *node) label(i int) string {
	alt := n.alts[i]
	a := n.sc.view(alt)
	if a.title != "" {
		return a.title
	}
	if a.konst != nil {
		return text(*a.konst)
	}
	for _, k := range sortedKeys((a.props)) {
		if p := n.sc.view(a.props[k]); p.konst != nil {
			return text(*p.konst)
		}
	}
	if alt.Ref != nil {
		loc := alt.Ref.Location
		if j := strings.LastIndexAny(loc, "/#"); j >= 0 && j+1 < len(loc) {
			if name, err := url.PathUnescape(loc[j+1:]); err == nil {
				return name
			}
		}
	}
	if t := a.typ(); t != "object" || len(a.props) == 0 {
		return t
	}
	return fmt.Sprintf("Option %d", i+1)
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := mapKeys(m)
	slices.Sort(out)
	return out
}

// typ is the node's JSON type for a form: the first non-null type given,
// else what its other keywords imply.
func (n *node) typ() string {
	if len(n.types) > 0 {
		return n.types[0]
	}
	switch {
	case len(n.props) > 0:
		return "object"
	case n.konst != nil:
		return jsonType(*n.konst)
	case len(n.enum) > 0:
		return jsonType(n.enum[0])
	case n.items != nil:
		return "array"
	}
	return "string"
}

func jsonType(v any) string {
	switch t := v.(type) {
	case bool:
		return "boolean"
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case float64:
		if t == math.Trunc(t) {
			return "integer"
		}
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "string"
}

// isObject tells whether the node's inputs are its properties.
func (n *node) isObject() bool { return n.typ() == "object" }

// source is where a form's values come from: the parameters (JSON
// values; none given means the schema's defaults) or a posted form. It
// keeps the form's budget: left is how many more fields it may generate,
// and cut says that it stopped for want of more. reserve of them are
// held for the required properties of required objects from the root
// down (the spine), which are not built yet, so that optional fields
// built before them cannot leave them out; spine says the properties
// being built are on it.
type source struct {
	posted  url.Values
	errs    map[string]string
	left    int
	cut     bool
	reserve int
	spine   bool
}

func newSource(posted url.Values, errs map[string]string) *source {
	return &source{posted: posted, errs: errs, left: MaxFields}
}

// spend takes one field from the budget; false (and the form is cut)
// when none is left.
func (src *source) spend() bool {
	if src.left-src.reserve <= 0 {
		src.cut = true
		return false
	}
	src.left--
	return true
}

// Fields builds the fields of an object schema under prefix, filled with
// values (the current parameters, or nil for the schema's defaults) and
// errors (by input name or by parameter path).
func Fields(raw json.RawMessage, prefix string, values map[string]any, errs map[string]string) ([]Field, error) {
	s, err := compile(raw)
	if s == nil || err != nil {
		return nil, err
	}
	var v any
	if values != nil {
		v = values
	}
	return rootFields(s.view(s.root), prefix, newSource(nil, errs), v, values != nil), nil
}

// Refill builds the fields of an object schema under prefix as a posted
// form had them, with errors (by input name or by parameter path), to show
// the form again.
func Refill(raw json.RawMessage, prefix string, posted url.Values, errs map[string]string) ([]Field, error) {
	s, err := compile(raw)
	if s == nil || err != nil {
		return nil, err
	}
	return rootFields(s.view(s.root), prefix, newSource(posted, errs), nil, true), nil
}

// rootFields are the fields of the schema's root, and the notice that the
// form stops when its budget ran out.
func rootFields(n *node, prefix string, src *source, v any, given bool) []Field {
	var out []Field
	if n.alts != nil {
		if src.spend() {
			out = []Field{src.field(n, prefix, prefix, "Parameters", true, v, given, true, 0)}
		}
	} else {
		src.reserve, src.spine = spineFields(n, 0, MaxFields/2), true
		out = src.props(n, prefix, prefix, v, given, true, 0)
	}
	if src.cut {
		out = append(out, Field{ID: "f-" + fieldID(prefix) + "-more", Type: "more", Description: moreNotice})
	}
	return out
}

// fieldID is an element id's part made of an input's name.
func fieldID(name string) string {
	return strings.NewReplacer(".", "-", "_", "-", choiceMark, "-").Replace(name)
}

// propNames are an object node's property names as a form orders them:
// required first, then by name (JSON objects carry no order).
func (n *node) propNames() []string {
	names := mapKeys(n.props)
	slices.SortFunc(names, func(a, b string) int {
		ra, rb := slices.Contains(n.required, a), slices.Contains(n.required, b)
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}

// spineFields counts the fields props builds for n's required
// properties and, where those are objects, for theirs, as deep as a form
// goes, up to limit: what the budget holds for them (source.reserve).
func spineFields(n *node, depth, limit int) int {
	count := 0
	if depth > maxDepth {
		return 0
	}
	for _, k := range n.required {
		c, ok := n.props[k]
		if !ok || count >= limit {
			continue
		}
		count++
		if child := n.sc.view(c); child.alts == nil && child.konst == nil && child.isObject() {
			count += spineFields(child, depth+1, limit-count)
		}
	}
	return min(count, limit)
}

// props builds the fields of an object node's properties, in propNames'
// order (required first), as many as the budget has left. An object takes
// its fields from the budget before it builds any, so a form shows its top
// level first, and an object costs its ordering only while the budget
// lasts. Required properties on the spine take the fields held for them;
// every other property takes only what the reserve leaves.
func (src *source) props(n *node, name, path string, v any, given, active bool, depth int) []Field {
	if depth > maxDepth || len(n.props) == 0 {
		return nil
	}
	if src.left <= 0 {
		src.cut = true
		return nil
	}
	names := n.propNames()
	onSpine := src.spine
	take := max(0, src.left-src.reserve)
	if onSpine {
		req := 0
		for req < len(names) && slices.Contains(n.required, names[req]) {
			req++
		}
		src.reserve = max(0, src.reserve-req)
		take = req + max(0, src.left-req-src.reserve)
	}
	if take = min(take, src.left); len(names) > take {
		names, src.cut = names[:take], true
	}
	src.left -= len(names)
	values, _ := v.(map[string]any)
	out := make([]Field, 0, len(names))
	for _, k := range names {
		pv, ok := values[k]
		if !ok {
			pv = nil
		}
		required := slices.Contains(n.required, k)
		src.spine = onSpine && required
		out = append(out, src.field(n.sc.view(n.props[k]), name+"."+k, path+"."+k, k, required, pv, given, active, depth+1))
	}
	src.spine = onSpine
	return out
}

// field builds the field of one node, named name in the form and path in
// the parameters. v is its current value (nil: none) when given says
// values were given, else its default applies. active says the field is
// not in an alternative that is not chosen: only then are errors named by
// path its own.
func (src *source) field(n *node, name, path, key string, required bool, v any, given, active bool, depth int) Field {
	f := Field{
		Name: name, Path: path, ID: "f-" + fieldID(name),
		Label: n.title, Description: n.description, Type: n.typ(), Required: required,
		Secret: n.writeOnly || n.format == "password",
	}
	if f.Label == "" {
		f.Label = key
	}
	f.Error = src.errs[name]
	if f.Error == "" && active {
		f.Error = src.errs[path]
	}
	if !given && v == nil && n.def != nil {
		v = *n.def
	}
	if n.min != nil {
		f.Min = ratText(n.min)
	}
	if n.max != nil {
		f.Max = ratText(n.max)
	}
	switch {
	case n.alts != nil:
		f.Type, f.AnyOf = "choice", n.anyOf
		f.Alternatives = src.alternatives(n, f.ID, name, path, required, v, given, active, depth)
		return f
	case n.konst != nil:
		f.Type, f.Value = "const", text(*n.konst)
		return f
	case f.Type == "object":
		f.Fields = src.props(n, name, path, v, given && v != nil, active, depth)
		return f
	}
	for _, e := range n.enum {
		f.Enum = append(f.Enum, text(e))
	}
	if f.Type == "array" && f.Error == "" && active {
		// An item's problem (path.2) is the field's.
		for _, k := range sortedKeys((src.errs)) {
			if strings.HasPrefix(k, path+".") {
				f.Error = src.errs[k]
				break
			}
		}
	}
	src.fill(&f, v)
	return f
}

// alternatives are the choices of a oneOf or anyOf node: the chosen one
// filled with v, the others empty.
func (src *source) alternatives(n *node, id, name, path string, required bool, v any, given, active bool, depth int) []Alternative {
	// An alternative's properties are on no spine: only one is chosen.
	spine := src.spine
	src.spine = false
	defer func() { src.spine = spine }()
	chosen := src.chosen(n, name, v)
	var out []Alternative
	for i := range n.alts {
		// An alternative is a field of the budget, and so is the input of
		// one that is not an object.
		a := n.alternative(i)
		if !src.spend() || (!a.isObject() && !src.spend()) {
			break
		}
		alt := Alternative{Index: i, ID: id + "-alt-" + strconv.Itoa(i), Label: n.label(i), Chosen: i == chosen}
		an := name + choiceMark + strconv.Itoa(i)
		av, ag := v, given
		if i != chosen {
			av, ag = nil, false
		}
		if a.isObject() {
			alt.Fields = src.props(a, an, path, av, ag, active && i == chosen, depth+1)
		} else {
			sub := src.field(a, an, path, alt.Label, required, av, ag, active && i == chosen, depth+1)
			sub.Label = alt.Label
			alt.Fields = []Field{sub}
		}
		out = append(out, alt)
	}
	return out
}

// fill sets an input's value: as posted, when the form is shown again,
// or else from v (a secret's never).
func (src *source) fill(f *Field, v any) {
	if src.posted != nil {
		switch f.Type {
		case "boolean":
			f.Checked = src.posted.Get(f.Name) != ""
		default:
			if !f.Secret {
				f.Value = src.posted.Get(f.Name)
			}
		}
		return
	}
	switch f.Type {
	case "boolean":
		f.Checked = v == true
	case "array":
		if list, ok := v.([]any); ok {
			lines := make([]string, len(list))
			for i, e := range list {
				lines[i] = text(e)
			}
			f.Value = strings.Join(lines, "\n")
		}
	default:
		if v != nil && !f.Secret {
			f.Value = text(v)
		}
	}
}

// chosen is the index of the alternative a choice shows selected: the one
// posted, else the first whose schema the current value (or the default)
// is valid against, as the library judges it.
func (src *source) chosen(n *node, name string, v any) int {
	if src.posted != nil {
		if i, err := strconv.Atoi(src.posted.Get(name + choiceMark)); err == nil && i >= 0 && i < len(n.alts) {
			return i
		}
		return 0
	}
	if v == nil {
		return 0
	}
	for i, a := range n.alts {
		if a.Validate(v) == nil {
			return i
		}
	}
	return 0
}

func ratText(r *big.Rat) string {
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// text shows a JSON value as a form shows it.
func text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case int64:
		return strconv.FormatInt(t, 10)
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

// Error is a problem with one posted field, named by its input's name.
type Error struct {
	Field, Message string
}

// Parse reads the fields of an object schema under prefix from a posted
// form into parameters. Values that cannot have the schema's type are
// errors naming their field; so are required fields left empty. Empty
// optional fields are left out, so the broker's defaults apply, and so is
// an optional object none of whose fields was filled in. Of a choice,
// only the chosen alternative is read.
func Parse(raw json.RawMessage, prefix string, posted url.Values) (map[string]any, []Error, error) {
	s, err := compile(raw)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]any{}
	if s == nil {
		return out, nil, nil
	}
	n := s.view(s.root)
	// The form read is the form shown: its budget bounds the reading too,
	// and an input past it is not read even if posted.
	r := &reader{posted: posted, shown: map[string]bool{}}
	r.show(rootFields(n, prefix, newSource(posted, nil), nil, true))
	var v any
	if n.alts != nil {
		v, _ = r.value(n, prefix, true, 0)
	} else {
		v, _ = r.object(n, prefix, true, 0)
	}
	if m, ok := v.(map[string]any); ok {
		out = m
	}
	return out, r.errs, nil
}

type reader struct {
	posted url.Values
	errs   []Error
	// shown are the names of the fields the form shows, the only ones
	// read.
	shown map[string]bool
}

// show adds fields, and what they hold, to the fields read.
func (r *reader) show(fields []Field) {
	for _, f := range fields {
		r.shown[f.Name] = true
		r.show(f.Fields)
		for _, a := range f.Alternatives {
			r.show(a.Fields)
		}
	}
}

// object reads an object node's properties; touched says whether anything
// was filled in (a checkbox left at false does not count).
func (r *reader) object(n *node, name string, required bool, depth int) (map[string]any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	outer := r.errs
	r.errs = nil
	var out map[string]any
	touched := false
	for _, k := range r.shownProps(n, name) {
		v, t := r.value(n.sc.view(n.props[k]), name+"."+k, slices.Contains(n.required, k), depth+1)
		if v != nil {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = v
		}
		touched = touched || t
	}
	mine := r.errs
	r.errs = outer
	if !touched && !required {
		// An optional object left alone is left out, with the required
		// fields it would have had.
		for _, e := range mine {
			if e.Message != "required" {
				r.errs = append(r.errs, e)
			}
		}
		return nil, false
	}
	r.errs = append(r.errs, mine...)
	if out == nil && required {
		out = map[string]any{}
	}
	return out, touched
}

// shownProps are the names, sorted, of an object node's properties that
// the form shows: only those are ordered, so that reading a form costs
// what it shows, not what its objects have.
func (r *reader) shownProps(n *node, name string) []string {
	var out []string
	for k := range n.props {
		if r.shown[name+"."+k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// value reads the field of one node; nil is a value left out.
func (r *reader) value(n *node, name string, required bool, depth int) (any, bool) {
	if n.alts != nil {
		i, err := strconv.Atoi(r.posted.Get(name + choiceMark))
		if err != nil || i < 0 || i >= len(n.alts) {
			i = 0
		}
		a := n.alternative(i)
		an := name + choiceMark + strconv.Itoa(i)
		// Choosing another alternative than the first is filling in.
		if a.isObject() {
			m, t := r.object(a, an, required || i != 0, depth+1)
			if m == nil {
				return nil, t || i != 0
			}
			return m, t || i != 0
		}
		if !r.shown[an] {
			return nil, false
		}
		v, t := r.value(a, an, required, depth+1)
		return v, t || i != 0
	}
	if n.konst != nil {
		return *n.konst, false
	}
	typ := n.typ()
	switch {
	case typ == "object":
		m, t := r.object(n, name, required, depth)
		if m == nil {
			return nil, t
		}
		return m, t
	case typ == "boolean" && len(n.enum) == 0:
		switch {
		case r.posted.Get(name) != "":
			return true, true
		case required || n.def != nil || r.posted.Has(name+".present"):
			return false, n.def != nil && *n.def == true
		}
		return nil, false
	}
	v := strings.TrimSpace(r.posted.Get(name))
	if typ == "array" {
		v = r.posted.Get(name)
	}
	if strings.TrimSpace(v) == "" {
		if required {
			r.errs = append(r.errs, Error{name, "required"})
		}
		return nil, false
	}
	val, msg := convert(typ, n, v)
	if msg != "" {
		r.errs = append(r.errs, Error{name, msg})
		return nil, true
	}
	// A default the form showed and nobody changed is not filling in.
	return val, n.def == nil || text(val) != text(*n.def)
}

func convert(typ string, n *node, v string) (any, string) {
	val, msg := convertType(typ, n, v)
	if msg != "" || len(n.enum) == 0 || typ == "array" {
		return val, msg
	}
	// An enum's choices post the text of their value.
	for _, e := range n.enum {
		if text(e) == v {
			return val, ""
		}
	}
	return nil, "must be one of the listed values"
}

func convertType(typ string, n *node, v string) (any, string) {
	switch typ {
	case "integer":
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, "must be a whole number"
		}
		return i, ""
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
		item := &node{}
		if n.items != nil {
			item = n.sc.view(n.items)
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

// Names lists the input names and parameter paths of fields and of what
// they hold (the chosen alternatives' fields only, by path), so that a page
// can tell which errors its form shows.
func Names(fields []Field) []string {
	var out []string
	for _, f := range fields {
		out = append(out, f.Name, f.Path)
		out = append(out, Names(f.Fields)...)
		for _, a := range f.Alternatives {
			if a.Chosen {
				out = append(out, Names(a.Fields)...)
			} else {
				for _, sub := range a.Fields {
					out = append(out, sub.Name)
				}
			}
		}
	}
	return out
}
