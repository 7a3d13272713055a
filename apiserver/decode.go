package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"

	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// checkedDecoder refuses, as it decodes, parameters whose numbers no
// float64 holds (1e400). The parameters are kept as raw JSON, so decoding
// passes them; but the field manager reads them as float64 before anything
// of Bindery sees the object, and it panics on them (the client would get a
// reset stream, not an answer).
type checkedDecoder struct{ runtime.Serializer }

func (d checkedDecoder) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, kind, err := d.Serializer.Decode(data, gvk, into)
	if err != nil {
		return obj, kind, err
	}
	var params *runtime.RawExtension
	switch o := obj.(type) {
	case *v1beta1.ServiceInstance:
		params = o.Spec.Parameters
	case *v1beta1.ServiceBinding:
		params = o.Spec.Parameters
	}
	if params != nil {
		if err := numbersInRange("spec.parameters", params.Raw); err != nil {
			return nil, kind, err
		}
	}
	return obj, kind, nil
}

// numbersInRange finds the first number of a JSON document (by path below
// prefix, in a stable order) that a float64 cannot hold. A document that
// is not JSON is left for its decoder to refuse.
func numbersInRange(prefix string, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return pgtext.Walk(prefix, v, func(path string, v any) error {
		if n, ok := v.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return fmt.Errorf("%s: the number %.40s is out of the range of a 64-bit floating point number", path, n)
			}
		}
		return nil
	})
}
