package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"sigs.k8s.io/yaml"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// listEncoder writes a list document a chunk of objects at a time: the
// same document k8s.io/apiserver writes for the list, its Table or its
// PartialObjectMetadataList, in JSON (its fields in the order of their Go
// types) or in YAML (as sigs.k8s.io/yaml writes it: keys sorted, the
// array's elements one per "- ").
type listEncoder struct {
	mediaType  string
	yaml       bool
	kind       string
	apiVersion string
	// array names the document's array: items, or a Table's rows.
	array string
	// columns are a Table's column definitions (JSON), nil otherwise.
	columns json.RawMessage
	// element is the JSON of one object's element of the array.
	element func(obj runtime.Object) ([]byte, error)
	// parts, when not nil, are all element reads of each object's spec
	// and status: the list is read with only those (catalog.Parts).
	parts *catalog.Parts
	// n counts the elements written; meta is the list's metadata (JSON).
	n    int
	meta []byte
}

// listEncoding is the encoder for the negotiated media type: the objects,
// their Table or their metadata.
func (st *storage) listEncoding(req *http.Request, mt negotiation.MediaTypeOptions) (*listEncoder, error) {
	enc := &listEncoder{mediaType: mt.Accepted.MediaType, yaml: mt.Accepted.MediaType == runtime.ContentTypeYAML, array: "items"}
	switch target := mt.Convert; {
	case target == nil:
		gvk := v1beta1.SchemeGroupVersion.WithKind(st.groupKind().Kind + "List")
		enc.kind, enc.apiVersion = gvk.Kind, gvk.GroupVersion().String()
		enc.element = func(obj runtime.Object) ([]byte, error) { return json.Marshal(obj) }
	case target.Kind == "Table":
		opts := &metav1.TableOptions{}
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		element, err := st.tableRow(opts, target.GroupVersion().WithKind("PartialObjectMetadata"))
		if err != nil {
			return nil, err
		}
		cols, err := json.Marshal(st.table.columnDefinitions(opts))
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		enc.kind, enc.apiVersion, enc.array, enc.columns, enc.element = "Table", target.GroupVersion().String(), "rows", cols, element
		if opts.IncludeObject != metav1.IncludeObject {
			enc.parts = &st.table.parts
		}
	case target.Kind == "PartialObjectMetadataList":
		gvk := target.GroupVersion().WithKind("PartialObjectMetadata")
		enc.kind, enc.apiVersion = target.Kind, target.GroupVersion().String()
		enc.element = func(obj runtime.Object) ([]byte, error) { return partialJSON(obj, gvk) }
		enc.parts = &catalog.Parts{} // metadata only
	default:
		return nil, negotiation.NewNotAcceptableError([]string{"the list, its Table or its PartialObjectMetadataList"})
	}
	return enc, nil
}

// tableRow encodes an object's row of a Table, with the object whole, its
// metadata (the default) or nothing, as opts.IncludeObject says.
func (st *storage) tableRow(opts *metav1.TableOptions, partial schema.GroupVersionKind) (func(runtime.Object) ([]byte, error), error) {
	switch opts.IncludeObject {
	case metav1.IncludeObject, metav1.IncludeMetadata, metav1.IncludeNone, "":
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", opts.IncludeObject))
	}
	// The row is written into scratch, which the next row reuses: the
	// encoder writes each element out before it asks for the next.
	var scratch []byte
	return func(obj runtime.Object) ([]byte, error) {
		row, err := st.table.row(obj)
		if err != nil {
			return nil, err
		}
		cells, err := json.Marshal(row.Cells)
		if err != nil {
			return nil, err
		}
		// A metav1.TableRow as json.Marshal writes it, the object encoded
		// once (json.Marshal would check and compact its JSON again).
		buf := append(scratch[:0], `{"cells":`...)
		buf = append(buf, cells...)
		buf = append(buf, `,"object":`...)
		switch opts.IncludeObject {
		case metav1.IncludeObject:
			versioned, err := scheme.ConvertToVersion(obj, v1beta1.SchemeGroupVersion)
			if err != nil {
				return nil, err
			}
			object, err := json.Marshal(versioned)
			if err != nil {
				return nil, err
			}
			buf = append(buf, object...)
		case metav1.IncludeNone:
			buf = append(buf, "null"...)
		default:
			if buf, err = appendPartialJSON(buf, obj, partial); err != nil {
				return nil, err
			}
		}
		scratch = append(buf, '}')
		return scratch, nil
	}, nil
}

// begin writes what comes before the array's elements.
func (e *listEncoder) begin(w io.Writer, rev int64, cont string) error {
	var err error
	if e.meta, err = json.Marshal(&metav1.ListMeta{ResourceVersion: strconv.FormatInt(rev, 10), Continue: cont}); err != nil {
		return err
	}
	if e.yaml {
		// Sorted: apiVersion, columnDefinitions, items or rows, kind,
		// metadata; the array's key is written with its first element.
		if err := writeYAMLField(w, "apiVersion", e.apiVersion); err != nil {
			return err
		}
		if e.columns != nil {
			return writeYAMLField(w, "columnDefinitions", e.columns)
		}
		return nil
	}
	head := fmt.Sprintf(`{"kind":%q,"apiVersion":%q,"metadata":%s,`, e.kind, e.apiVersion, e.meta)
	if e.columns != nil {
		head += `"columnDefinitions":` + string(e.columns) + `,`
	}
	_, err = io.WriteString(w, head+`"`+e.array+`":[`)
	return err
}

// items writes the elements of objs.
func (e *listEncoder) items(w io.Writer, objs []runtime.Object) error {
	for _, obj := range objs {
		raw, err := e.element(obj)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if e.yaml {
			err = e.yamlElement(w, raw)
		} else {
			if e.n > 0 {
				if _, err := io.WriteString(w, ","); err != nil {
					return err
				}
			}
			_, err = w.Write(raw)
		}
		if err != nil {
			return err
		}
		e.n++
	}
	if f, ok := w.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

func (e *listEncoder) yamlElement(w io.Writer, raw []byte) error {
	y, err := yaml.JSONToYAML(raw)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	var b strings.Builder
	if e.n == 0 {
		b.WriteString(e.array + ":\n")
	}
	for i, line := range strings.SplitAfter(strings.TrimSuffix(string(y), "\n"), "\n") {
		if i == 0 {
			b.WriteString("- ")
		} else {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	b.WriteString("\n")
	_, err = io.WriteString(w, b.String())
	return err
}

// end writes what follows the array's elements.
func (e *listEncoder) end(w io.Writer) error {
	if !e.yaml {
		_, err := io.WriteString(w, "]}\n")
		return err
	}
	if e.n == 0 {
		if _, err := io.WriteString(w, e.array+": []\n"); err != nil {
			return err
		}
	}
	if err := writeYAMLField(w, "kind", e.kind); err != nil {
		return err
	}
	return writeYAMLField(w, "metadata", json.RawMessage(e.meta))
}

// writeYAMLField writes one key of a YAML document and its value.
func writeYAMLField(w io.Writer, key string, value any) error {
	raw, err := json.Marshal(map[string]any{key: value})
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(raw)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

// listWriter is a list response: buffered, and compressed with gzip once
// it outgrows gzipAfter when the client accepts it, as k8s.io/apiserver
// compresses its responses. Nothing reaches the client before the first
// flush, so that an error before it can still be answered as a Status.
type listWriter struct {
	hw        http.ResponseWriter
	mediaType string
	gzipOK    bool
	buf       bytes.Buffer
	out       io.Writer
	gz        *gzip.Writer
}

// gzipAfter is the size from which a response is compressed (the one
// k8s.io/apiserver uses).
const gzipAfter = 128 << 10

func newListWriter(w http.ResponseWriter, req *http.Request, mediaType string) *listWriter {
	gzipOK := utilfeature.DefaultFeatureGate.Enabled(features.APIResponseCompression) &&
		strings.Contains(req.Header.Get("Accept-Encoding"), "gzip")
	return &listWriter{hw: w, mediaType: mediaType, gzipOK: gzipOK}
}

func (w *listWriter) Write(p []byte) (int, error) {
	if w.out != nil {
		return w.out.Write(p)
	}
	return w.buf.Write(p)
}

// Flush sends what is buffered once there is enough of it to decide on
// compression, and pushes it to the client.
func (w *listWriter) Flush() error {
	if w.out == nil && w.buf.Len() < gzipAfter {
		return nil
	}
	if err := w.send(); err != nil {
		return err
	}
	if w.gz != nil {
		if err := w.gz.Flush(); err != nil {
			return err
		}
	}
	if f, ok := w.hw.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// send starts the response, if it has not started, with what is buffered.
func (w *listWriter) send() error {
	if w.out != nil {
		return nil
	}
	h := w.hw.Header()
	h.Set("Content-Type", w.mediaType)
	w.out = w.hw
	if w.gzipOK && w.buf.Len() >= gzipAfter {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		w.gz = gzipWriters.Get().(*gzip.Writer)
		w.gz.Reset(w.hw)
		w.out = w.gz
	}
	w.hw.WriteHeader(http.StatusOK)
	_, err := w.out.Write(w.buf.Bytes())
	w.buf = bytes.Buffer{}
	return err
}

// written says whether the response has started.
func (w *listWriter) written() bool { return w.out != nil }

// close ends the response.
func (w *listWriter) close() error {
	if err := w.send(); err != nil {
		return err
	}
	if w.gz != nil {
		err := w.gz.Close()
		w.gz.Reset(io.Discard)
		gzipWriters.Put(w.gz)
		w.gz, w.out = nil, w.hw
		return err
	}
	return nil
}

// gzipWriters keeps compressors between lists: each holds about a
// megabyte of state, which a page of 500 rows allocated afresh.
var gzipWriters = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return gz
}}

// isExpired says whether a read failed for holding its snapshot too long.
func isExpired(err error) bool { return errors.Is(err, catalog.ErrSnapshotExpired) }
