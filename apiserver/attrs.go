package apiserver

import (
	"encoding/binary"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sync"
	"unique"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// attrs is what a selector looks at of an object, with its Extra (which
// the change feed's documents leave out: catalog.Change). The hub keeps
// one of every object, so it is compact: some 200 bytes for an instance
// with its spec labels, where maps of its labels and fields took some
// 1.5 kB. Its namespace is in its fields (every namespaced kind selects
// by metadata.namespace), its labels are shared with every object that
// has the same ones, and its Extra, which most objects lack, is a string.
type attrs struct {
	labels labelSet
	fields fieldSet
	extra  string
	// visibleIn is a cluster plan's catalog.VisibleInAnnotation, nil when
	// it has none (every other object): whom the plan was hidden from
	// before a change (predicate.transition).
	visibleIn *string
}

func attrsOf(obj runtime.Object, extra json.RawMessage) *attrs {
	m, err := meta.Accessor(obj)
	if err != nil {
		return &attrs{extra: string(extra)}
	}
	a := &attrs{labels: labelSetOf(m.GetLabels()), fields: fieldSetOf(obj), extra: string(extra)}
	if _, ok := obj.(*v1beta1.ClusterServicePlan); ok {
		if v, ok := m.GetAnnotations()[catalog.VisibleInAnnotation]; ok {
			a.visibleIn = &v
		}
	}
	return a
}

// restriction is the namespaces a cluster plan was restricted to, and
// whether it was, as restrictedTo reads them of the plan.
func (a *attrs) restriction() ([]string, bool) {
	if a.visibleIn == nil {
		return nil, false
	}
	return catalog.VisibleNamespaces(&catalog.Meta{Annotations: map[string]string{catalog.VisibleInAnnotation: *a.visibleIn}})
}

// namespace is the object's namespace, empty for a cluster-scoped one.
func (a *attrs) namespace() string { return a.fields.Get("metadata.namespace") }

// extraJSON is the object's Extra, nil when it has none.
func (a *attrs) extraJSON() json.RawMessage {
	if a.extra == "" {
		return nil
	}
	return json.RawMessage(a.extra)
}

// objectID is a catalog object's id (a UUID) as the hub keys it: 16
// bytes, where the string took 48 and a pointer.
type objectID [16]byte

// idOf is the key of the catalog id id; false when id is not a UUID,
// which the catalog's ids always are.
func idOf(id string) (objectID, bool) {
	u, err := uuid.Parse(id)
	return objectID(u), err == nil
}

// labelSet is an object's labels (labels.Labels) in one string, each key
// and value preceded by its length as a uvarint, in the order of their
// keys. The string is interned (package unique): the objects that carry
// the same labels (a team's, Service Catalog's spec labels of one plan)
// share one copy, which the runtime frees with the last of them.
type labelSet struct{ h unique.Handle[string] }

func labelSetOf(l map[string]string) labelSet {
	if len(l) == 0 {
		return labelSet{}
	}
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(l)) {
		v := l[k]
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return labelSet{unique.Make(string(b))}
}

// encoded is the set's encoding, empty when it has no labels.
func (s labelSet) encoded() string {
	if s == (labelSet{}) {
		return ""
	}
	return s.h.Value()
}

// Has says whether the set holds the label.
func (s labelSet) Has(label string) bool {
	_, ok := s.Lookup(label)
	return ok
}

// Get is the label's value, empty when the set lacks it.
func (s labelSet) Get(label string) string {
	v, _ := s.Lookup(label)
	return v
}

// Lookup is the label's value and whether the set holds it.
func (s labelSet) Lookup(label string) (string, bool) {
	for rest := s.encoded(); rest != ""; {
		var k, v string
		k, rest = nextString(rest)
		v, rest = nextString(rest)
		if k == label {
			return v, true
		}
	}
	return "", false
}

// nextString splits a uvarint-prefixed string off the front of s.
func nextString(s string) (string, string) {
	var n, shift int
	for i := 0; i < len(s); i++ {
		n |= int(s[i]&0x7f) << shift
		if s[i] < 0x80 {
			s = s[i+1:]
			return s[:n], s[n:]
		}
		shift += 7
	}
	return "", ""
}

// fieldSet is an object's selectable fields (fields.Fields) without the
// empty ones, which a field selector cannot tell from absent ones: in one
// string, each field as the index of its key among its kind's (keys)
// followed by its uvarint-prefixed value.
type fieldSet struct {
	keys *[]string
	enc  string
}

// fieldKeys holds the sorted keys of v1beta1.SelectableFields by Go type:
// every object of a kind has the same.
var fieldKeys sync.Map // reflect.Type → *[]string

func fieldSetOf(obj runtime.Object) fieldSet {
	set := v1beta1.SelectableFields(obj)
	if len(set) == 0 {
		return fieldSet{}
	}
	typ := reflect.TypeOf(obj)
	keys, ok := fieldKeys.Load(typ)
	if !ok {
		sorted := slices.Sorted(func(yield func(string) bool) {
			for k := range set {
				if !yield(k) {
					return
				}
			}
		})
		if len(sorted) > 256 {
			panic("apiserver: more selectable fields than a byte indexes")
		}
		keys, _ = fieldKeys.LoadOrStore(typ, &sorted)
	}
	s := fieldSet{keys: keys.(*[]string)}
	var b []byte
	for i, k := range *s.keys {
		if v := set[k]; v != "" {
			b = append(b, byte(i))
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	s.enc = string(b)
	return s
}

// Has says whether the set holds a non-empty value of the field.
func (s fieldSet) Has(field string) bool { return s.Get(field) != "" }

// Get is the field's value, empty when the set lacks it.
func (s fieldSet) Get(field string) string {
	if s.keys == nil {
		return ""
	}
	i, ok := slices.BinarySearch(*s.keys, field)
	if !ok {
		return ""
	}
	for rest := s.enc; rest != ""; {
		k := int(rest[0])
		var v string
		v, rest = nextString(rest[1:])
		if k == i {
			return v
		}
	}
	return ""
}
