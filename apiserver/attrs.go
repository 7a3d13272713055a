package apiserver

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// attrs is what a selector looks at of an object, with its Extra (which
// the change feed's documents leave out: catalog.Change). The hub keeps
// one of every object, so it is compact: a few hundred bytes for an
// instance, where maps of its labels and fields took some 1.5 kB.
type attrs struct {
	// namespace is a slice of fields' encoding: it costs nothing more.
	namespace string
	labels    labelSet
	fields    fieldSet
	extra     json.RawMessage
	// rev is, in hub.gone, the revision of the deletion.
	rev int64
}

func attrsOf(obj runtime.Object, extra json.RawMessage) *attrs {
	if len(extra) == 0 {
		extra = nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return &attrs{extra: extra}
	}
	a := &attrs{labels: labelSetOf(m.GetLabels()), fields: fieldSetOf(obj), extra: extra}
	a.namespace = a.fields.Get("metadata.namespace")
	if a.namespace != m.GetNamespace() { // a kind without the field
		a.namespace = m.GetNamespace()
	}
	return a
}

// labelSet is an object's labels (labels.Labels) in one string: each key
// and value preceded by its length as a uvarint.
type labelSet string

func labelSetOf(l map[string]string) labelSet {
	if len(l) == 0 {
		return ""
	}
	var b []byte
	for k, v := range l {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return labelSet(b)
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
	for rest := string(s); rest != ""; {
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
