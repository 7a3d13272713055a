package catalog

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxSelectorTerms bounds a label selector's requirements and values, in
// all. Each is a condition of the list's statement, and PostgreSQL's
// planning of them grows faster than their number: a page of 50 with a
// selector of one key in 1,000 values took 68 ms, in 4,000 values 403
// ms, in 16,000 values 4.9 s (the bound before, set by PostgreSQL's
// 65,535 parameters), so one request could hold a database core for
// seconds. Selectors in use have a few terms.
const MaxSelectorTerms = 1000

// CheckLabels refuses a label selector past MaxSelectorTerms, naming the
// field, so that a front door can refuse it before it reads.
func CheckLabels(sel labels.Selector) error {
	if sel == nil {
		return nil
	}
	reqs, _ := sel.Requirements()
	n := 0
	for _, r := range reqs {
		n += max(1, r.Values().Len())
	}
	if n > MaxSelectorTerms {
		return invalid(field.ErrorList{bad(field.NewPath("labelSelector"),
			fmt.Sprintf("must have at most %d requirements and values in all, not %d", MaxSelectorTerms, n))})
	}
	return nil
}

// addLabels narrows f to the objects sel selects, with Kubernetes' label
// selector semantics, in SQL: a selective list reads only what it
// returns (through the labels' GIN index) instead of every object.
// Containment (@>) and key existence (?) are what the index serves; the
// negative forms also match objects without the key, as Kubernetes'
// selectors do. A selector past MaxSelectorTerms is refused.
func (f *filter) addLabels(sel labels.Selector) error {
	if sel == nil || sel.Empty() {
		return nil
	}
	if err := CheckLabels(sel); err != nil {
		return err
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		key := r.Key()
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			f.addAnyContains(key, r.Values().List(), false)
		case selection.NotEquals, selection.NotIn:
			f.addAnyContains(key, r.Values().List(), true)
		case selection.Exists:
			f.addHasKey(key, false)
		case selection.DoesNotExist:
			f.addHasKey(key, true)
		case selection.GreaterThan, selection.LessThan:
			op := ">"
			if r.Operator() == selection.LessThan {
				op = "<"
			}
			n, _ := strconv.ParseInt(r.Values().List()[0], 10, 64)
			// Kubernetes compares labels that parse as 64-bit integers
			// only (strconv.ParseInt): a label value has no sign, but
			// may have leading zeros or more digits than int64 holds.
			// Nested, so that only digits are cast.
			f.add("CASE WHEN metadata->'labels'->>? ~ '^[0-9]+$' THEN CASE WHEN (metadata->'labels'->>?)::numeric <= 9223372036854775807 "+
				"THEN (metadata->'labels'->>?)::numeric "+op+" ? ELSE false END ELSE false END", key, key, key, n)
		default:
			// A selector the SQL does not know selects nothing here: the
			// callers apply it again in memory.
			f.add("false")
		}
	}
	return nil
}

// addHasKey adds "the labels have key" (or, negated, "do not"). It
// numbers its parameter itself: jsonb's ? operator is add's placeholder.
func (f *filter) addHasKey(key string, negate bool) {
	f.args = append(f.args, key)
	cond := fmt.Sprintf("metadata->'labels' ? $%d", len(f.args))
	if negate {
		cond = "NOT coalesce(" + cond + ", false)"
	}
	f.conds = append(f.conds, cond)
}

// addAnyContains adds "the label key has one of values" (or, negated,
// "has none of them, or is missing"), as containments the index serves.
func (f *filter) addAnyContains(key string, values []string, negate bool) {
	if len(values) == 0 {
		if !negate {
			f.add("false")
		}
		return
	}
	var b strings.Builder
	args := make([]any, 0, len(values))
	for i, v := range values {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("metadata->'labels' @> ?::jsonb")
		doc, _ := json.Marshal(map[string]string{key: v})
		args = append(args, string(doc))
	}
	cond := "(" + b.String() + ")"
	if negate {
		cond = "NOT coalesce(" + cond + ", false)"
	}
	f.add(cond, args...)
}
