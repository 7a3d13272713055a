package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/internal/jsondepth"
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

// shallowBodies refuses, with 400, a create, update or patch of the API's
// resources whose JSON body nests deeper than jsondepth.Max, before
// k8s.io/apiserver decodes or applies it: it applies a merge patch in time
// that grows with the square of its depth (parameters 1,000 levels deep
// took 158 ms of the server's CPU, 3,000 levels 1.2 s, 6,000 levels 4.7
// s). A body over limit (the server's
// largest request body) is left for k8s.io/apiserver to refuse, and a body
// that is no JSON for its decoder.
func shallowBodies(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericapirequest.RequestInfoFrom(req.Context())
		if !ok || !info.IsResourceRequest || info.APIGroup != v1beta1.GroupName || req.Body == nil || !isJSON(req) ||
			(info.Verb != "create" && info.Verb != "update" && info.Verb != "patch") {
			next.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
		if err == nil && int64(len(body)) <= limit && jsondepth.Exceeds(body, jsondepth.Max) {
			responsewriters.ErrorNegotiated(apierrors.NewBadRequest(fmt.Sprintf(
				"the request body nests deeper than %d levels of objects and arrays", jsondepth.Max)), codecs, v1beta1.SchemeGroupVersion, w, req)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// isJSON tells whether req's body is JSON: a create or update, or a JSON,
// merge or strategic merge patch.
func isJSON(req *http.Request) bool {
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil {
		return false
	}
	switch mt {
	case "application/json", string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType):
		return true
	}
	return false
}

// plainSelectors refuses, with 400 naming it, a labelSelector or
// fieldSelector of the API's resources that holds a NUL. k8s.io/apimachinery's
// selector parser reads a NUL as the end of the text: labelSelector=%00 would
// select every object, and a delete of the collection with it would delete
// them all.
func plainSelectors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericapirequest.RequestInfoFrom(req.Context())
		if ok && info.IsResourceRequest && info.APIGroup == v1beta1.GroupName {
			q := req.URL.Query()
			for _, name := range []string{"labelSelector", "fieldSelector"} {
				for _, v := range q[name] {
					if strings.IndexByte(v, 0) >= 0 {
						err := apierrors.NewBadRequest(fmt.Sprintf("%s %.100q: contains a NUL character", name, v))
						responsewriters.ErrorNegotiated(err, codecs, v1beta1.SchemeGroupVersion, w, req)
						return
					}
				}
			}
		}
		next.ServeHTTP(w, req)
	})
}
