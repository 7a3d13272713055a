package servicebinding

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// The webhook answers with a JSON patch (RFC 6902) of the fields a
// projection writes, computed from what it wrote rather than by diffing
// the whole object before and after: that diff (decoding both documents
// again) was a third of the webhook's time per review.

// fieldBefore is one written field as it was before the projection: for
// each prefix of its path, whether the object held a non-null value there,
// and the field's value, encoded.
type fieldBefore struct {
	path    []string
	present []bool
	value   []byte
}

// fieldPaths are the fields of a workload that a projection may write
// under mapping m: the annotations, the volumes and each container array.
func fieldPaths(m Mapping) [][]string {
	paths := [][]string{m.Annotations, m.Volumes}
	for _, c := range m.Containers {
		paths = append(paths, c.Path)
	}
	return paths
}

// snapshotFields records the fields at paths of obj before they are written.
func snapshotFields(obj map[string]any, paths [][]string) ([]fieldBefore, error) {
	out := make([]fieldBefore, 0, len(paths))
	for _, p := range paths {
		f := fieldBefore{path: p, present: make([]bool, len(p))}
		var cur any = obj
		for i, k := range p {
			m, ok := cur.(map[string]any)
			if !ok || m[k] == nil {
				break
			}
			cur = m[k]
			f.present[i] = true
		}
		if f.present[len(p)-1] {
			v, err := json.Marshal(cur)
			if err != nil {
				return nil, err
			}
			f.value = v
		}
		out = append(out, f)
	}
	return out, nil
}

// lookup returns the non-null value at path in obj.
func lookup(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok || m[k] == nil {
			return nil, false
		}
		cur = m[k]
	}
	return cur, true
}

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// patchFields returns the JSON patch that turns the object the snapshot
// was taken of into obj, given that only the snapshot's fields changed
// (and objects on the way to them were made or, left empty, removed), or
// nil when nothing changed. A field that appears is added at its highest
// new ancestor, one that goes is removed at its highest removed ancestor,
// one that changes is replaced whole ("add" replaces an existing member).
func patchFields(obj map[string]any, before []fieldBefore) ([]byte, error) {
	var ops []patchOp
	var at [][]string
	covered := func(p []string) bool {
		return slices.ContainsFunc(at, func(a []string) bool { return len(a) <= len(p) && slices.Equal(a, p[:len(a)]) })
	}
	// Shorter paths first, so that an operation on an ancestor covers its
	// descendants.
	before = slices.Clone(before)
	slices.SortStableFunc(before, func(a, b fieldBefore) int { return len(a.path) - len(b.path) })
	for _, f := range before {
		last := len(f.path) - 1
		now, ok := lookup(obj, f.path)
		switch {
		case !ok && !f.present[last]:
			continue
		case ok:
			v, err := json.Marshal(now)
			if err != nil {
				return nil, err
			}
			if f.present[last] && bytes.Equal(v, f.value) {
				continue
			}
			// The highest ancestor that was not there.
			i := slices.Index(f.present, false)
			if i < 0 {
				i = last
			}
			target := f.path[:i+1]
			if covered(target) {
				continue
			}
			if i < last {
				ancestor, _ := lookup(obj, target)
				if v, err = json.Marshal(ancestor); err != nil {
					return nil, err
				}
			}
			ops = append(ops, patchOp{Op: "add", Path: pointer(target), Value: v})
			at = append(at, target)
		default:
			// Removed: at the highest ancestor no longer there.
			i := 0
			for ; i < last; i++ {
				if _, ok := lookup(obj, f.path[:i+1]); !ok {
					break
				}
			}
			target := f.path[:i+1]
			if covered(target) {
				continue
			}
			ops = append(ops, patchOp{Op: "remove", Path: pointer(target)})
			at = append(at, target)
		}
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// pointer is path as a JSON pointer (RFC 6901).
func pointer(path []string) string {
	var b strings.Builder
	for _, k := range path {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(k))
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
