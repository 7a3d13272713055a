// Package params compiles the JSON schemas of OSB plans and checks
// parameters against them, naming the path of every problem. The broker
// checks what platforms send it; the catalog checks what users ask for
// before anything reaches a broker.
package params

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxSchema is the largest schema OSB allows.
const MaxSchema = 64 << 10

// Schema is a compiled parameters schema.
type Schema struct{ s *jsonschema.Schema }

// noLoader refuses every external reference: OSB schemas must not have any.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not allowed", url)
}

// Compile compiles a schema. requireDialect demands the $schema keyword,
// as OSB requires of schemas in a catalogue; without it the latest draft
// is assumed.
func Compile(raw json.RawMessage, requireDialect bool) (*Schema, error) {
	if len(raw) > MaxSchema {
		return nil, fmt.Errorf("schema has %d bytes, more than the 64 kB OSB allows", len(raw))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object")
	}
	if _, ok := obj["$schema"]; !ok && requireDialect {
		return nil, errors.New("$schema is required")
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const loc = "urn:bindery:plan-parameters"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, err
	}
	return &Schema{s: s}, nil
}

// Compiled is the compiled schema itself, with every $ref resolved, for
// readers that walk its keywords (the web UI builds its forms from it).
func (s *Schema) Compiled() *jsonschema.Schema { return s.s }

var printer = message.NewPrinter(language.English)

// Validate checks params (JSON-shaped values; numbers as json.Number or
// float64) and returns one message per problem, each starting with its
// path below prefix, sorted. A nil schema accepts everything.
func (s *Schema) Validate(prefix string, params map[string]any) []string {
	if s == nil {
		return nil
	}
	var doc any = map[string]any{}
	if params != nil {
		doc = params
	}
	err := s.s.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{prefix + ": " + err.Error()}
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			path := prefix
			for _, tok := range e.InstanceLocation {
				path += "/" + url.PathEscape(tok)
			}
			msgs = append(msgs, fmt.Sprintf("%s: %s", path, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(msgs)
	return msgs
}

// Decode reads a JSON object the way Validate wants it (numbers as
// json.Number).
func Decode(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, errors.New("must be a JSON object")
	}
	return m, nil
}

// Join formats Validate's messages as one line.
func Join(msgs []string) string { return strings.Join(msgs, "; ") }
