package apiserver

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// partialJSON is obj's metadata as a PartialObjectMetadata of gvk, in
// JSON: each item of a PartialObjectMetadataList.
func partialJSON(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	return appendPartialJSON(make([]byte, 0, 1024), obj, gvk)
}

// appendPartialJSON appends partialJSON's document to buf: also the object
// of each row of a Table.
func appendPartialJSON(buf []byte, obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	if k := kindOf(obj); k != nil {
		om, _, _ := k.parts(obj)
		if out, ok := appendPartial(buf, om, gvk); ok {
			return out, nil
		}
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	p := meta.AsPartialObjectMetadata(m)
	p.SetGroupVersionKind(gvk)
	out, err := json.Marshal(p)
	return append(buf, out...), err
}

// appendPartial appends the JSON json.Marshal writes for a
// PartialObjectMetadata of gvk with metadata m, byte for byte, for the
// metadata the catalog's instances and bindings have: a page of a Table
// spent a third of its time in json.Marshal's reflection and its second
// pass over each metav1.Time. ok is false, and nothing is appended, when m
// has a field this does not write (json.Marshal is used then).
func appendPartial(buf []byte, m *metav1.ObjectMeta, gvk schema.GroupVersionKind) (out []byte, ok bool) {
	if m.GenerateName != "" || m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil ||
		len(m.OwnerReferences) > 0 || len(m.ManagedFields) > 0 {
		return buf, false
	}
	//lint:ignore SA1019 json.Marshal still writes a selfLink that is set.
	if m.SelfLink != "" {
		return buf, false
	}
	start := len(buf)
	apiVersion := gvk.GroupVersion().String()
	buf = append(buf, '{')
	if gvk.Kind != "" {
		buf = append(buf, `"kind":`...)
		buf, ok = appendString(buf, gvk.Kind)
		buf = append(buf, ',')
	}
	if apiVersion != "" && ok {
		buf = append(buf, `"apiVersion":`...)
		buf, ok = appendString(buf, apiVersion)
		buf = append(buf, ',')
	}
	buf = append(buf, `"metadata":{`...)
	first := true
	field := func(name, value string) {
		if value == "" || !ok {
			return
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, '"')
		buf = append(buf, name...)
		buf = append(buf, `":`...)
		buf, ok = appendString(buf, value)
	}
	raw := func(name string, value []byte) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, '"')
		buf = append(buf, name...)
		buf = append(buf, `":`...)
		buf = append(buf, value...)
	}
	field("name", m.Name)
	field("namespace", m.Namespace)
	field("uid", string(m.UID))
	field("resourceVersion", m.ResourceVersion)
	if m.Generation != 0 {
		raw("generation", strconv.AppendInt(nil, m.Generation, 10))
	}
	if !m.CreationTimestamp.IsZero() {
		raw("creationTimestamp", strconv.AppendQuote(nil, m.CreationTimestamp.UTC().Format(time.RFC3339)))
	}
	buf, ok = appendStringMap(buf, &first, "labels", m.Labels, ok)
	buf, ok = appendStringMap(buf, &first, "annotations", m.Annotations, ok)
	if len(m.Finalizers) > 0 && ok {
		raw("finalizers", nil)
		for i, f := range m.Finalizers {
			buf = append(buf, "[,"[min(i, 1)])
			if buf, ok = appendString(buf, f); !ok {
				break
			}
		}
		buf = append(buf, ']')
	}
	if !ok {
		return buf[:start], false
	}
	return append(buf, "}}"...), true
}

// appendStringMap appends "name":{...} with m's keys sorted, as
// json.Marshal writes a map, when m is not empty.
func appendStringMap(buf []byte, first *bool, name string, m map[string]string, ok bool) ([]byte, bool) {
	if len(m) == 0 || !ok {
		return buf, ok
	}
	if !*first {
		buf = append(buf, ',')
	}
	*first = false
	buf = append(buf, '"')
	buf = append(buf, name...)
	buf = append(buf, `":{`...)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		if buf, ok = appendString(buf, k); !ok {
			return buf, false
		}
		buf = append(buf, ':')
		if buf, ok = appendString(buf, m[k]); !ok {
			return buf, false
		}
	}
	return append(buf, '}'), true
}

// appendString appends s quoted, when it is printable ASCII that
// encoding/json writes as it is (no quote, backslash or the HTML
// characters it escapes); ok is false otherwise.
func appendString(buf []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return buf, false
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"'), true
}
