// Package jsondepth tells whether a JSON document nests deeper than a
// bound, reading it as tokens, so that a front door can refuse a request
// body whose depth would cost it more than its size does: JSON merge
// patches are applied in time that grows with the square of their depth.
package jsondepth

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// Max is how deep the front doors let a request body nest: Service
// Catalog's objects and brokers' parameters nest a few levels.
const Max = 100

// Exceeds tells whether doc nests deeper than max levels of objects and
// arrays. It stops there, or at the first thing that is no JSON, which is
// left for the body's decoder to refuse.
func Exceeds(doc []byte, max int) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(doc), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		if _, err := dec.ReadToken(); err != nil {
			return false
		}
		if dec.StackDepth() > max {
			return true
		}
	}
}
