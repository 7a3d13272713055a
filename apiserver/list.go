package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/rest"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// Lists are served here rather than by k8s.io/apiserver's list handler,
// which builds a list whole (every object, then its Table or its JSON)
// before writing a byte: 100,000 instances were some 900 MB. A list is
// read from one snapshot a chunk at a time (catalog.Store.ScanRaw) and
// each chunk encoded and written before the next is read, as JSON or
// YAML, as the objects, their Table (kubectl's) or their metadata, so the
// server's memory does not grow with the list. A page of up to pageRead
// objects is read whole, as the storage's List reads it (filling a page
// that a field selector thins out), and written the same way.
//
// Only `pretty=true` on a page is left to k8s.io/apiserver (an unpaged
// list is written compact whatever it asks for): its output is the one
// the encoders here reproduce, and tests compare them.

// pageRead is the largest page read whole; larger lists are scanned.
const pageRead = 500

// listServer answers the list requests of servicecatalog.k8s.io/v1beta1.
type listServer struct {
	// storages are the resources' storages by resource name, set once
	// the server is built.
	storages map[string]*storage
}

// wrap answers the list requests of the API's resources and hands every
// other request to next (the API's own handlers). It sits inside the
// filter chain, behind authentication, authorization and the request's
// deadline.
func (ls *listServer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericapirequest.RequestInfoFrom(req.Context())
		if !ok || !info.IsResourceRequest || info.Verb != "list" || info.Subresource != "" ||
			info.APIGroup != v1beta1.GroupName || info.APIVersion != v1beta1.SchemeGroupVersion.Version {
			next.ServeHTTP(w, req)
			return
		}
		st := ls.storages[info.Resource]
		if st == nil {
			next.ServeHTTP(w, req)
			return
		}
		ctx := genericapirequest.WithNamespace(req.Context(), info.Namespace)
		opts, err := listOptionsOf(req, st)
		if err != nil {
			responsewriters.ErrorNegotiated(err, codecs, v1beta1.SchemeGroupVersion, w, req)
			return
		}
		if isPretty(req) && opts.Limit > 0 && opts.Limit <= pageRead {
			next.ServeHTTP(w, req)
			return
		}
		mt, _, err := negotiation.NegotiateOutputMediaType(req, withoutProtobuf{codecs}, listRestrictions{})
		if err != nil {
			responsewriters.ErrorNegotiated(err, codecs, v1beta1.SchemeGroupVersion, w, req)
			return
		}
		enc, err := st.listEncoding(req, mt)
		if err != nil {
			responsewriters.ErrorNegotiated(err, codecs, v1beta1.SchemeGroupVersion, w, req)
			return
		}
		st.serveList(ctx, w, req, opts, enc)
	})
}

func isPretty(req *http.Request) bool {
	switch req.URL.Query().Get("pretty") {
	case "", "0", "false":
		return false
	}
	return true
}

// listOptionsOf decodes and checks a list's options as k8s.io/apiserver's
// list handler does.
func listOptionsOf(req *http.Request, st *storage) (*metainternalversion.ListOptions, error) {
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	watchList := utilfeature.DefaultFeatureGate.Enabled(features.WatchList)
	metainternalversion.SetListOptionsDefaults(opts, watchList)
	if errs := metainternalversionvalidation.ValidateListOptions(opts, watchList); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if opts.FieldSelector != nil {
		gvk := v1beta1.SchemeGroupVersion.WithKind(st.groupKind().Kind)
		sel, err := opts.FieldSelector.Transform(func(label, value string) (string, string, error) {
			return scheme.ConvertFieldLabel(gvk, label, value)
		})
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		opts.FieldSelector = sel
	}
	return opts, nil
}

// listRestrictions are what a list can be converted to: a Table and
// metadata only, in meta.k8s.io v1 or v1beta1, as k8s.io/apiserver allows
// for a resource with a table convertor.
type listRestrictions struct{}

func (listRestrictions) AllowsMediaTypeTransform(mimeType, mimeSubType string, gvk *schema.GroupVersionKind) bool {
	if gvk == nil {
		return true
	}
	if gvk.GroupVersion() != metav1.SchemeGroupVersion && gvk.GroupVersion() != metav1beta1.SchemeGroupVersion {
		return false
	}
	switch gvk.Kind {
	case "Table":
		return mimeType == "application" && (mimeSubType == "json" || mimeSubType == "yaml")
	case "PartialObjectMetadata", "PartialObjectMetadataList":
		return true
	}
	return false
}

func (listRestrictions) AllowsServerVersion(string) bool  { return false }
func (listRestrictions) AllowsStreamSchema(s string) bool { return s == "watch" }

// serveList reads the list opts ask for and writes it with enc as it
// reads. An error before the first byte is answered as a Status; after it,
// the response is cut short, so that the client sees a broken response
// rather than a complete-looking short list.
func (st *storage) serveList(ctx context.Context, w http.ResponseWriter, req *http.Request, opts *metainternalversion.ListOptions, enc *listEncoder) {
	out := newListWriter(w, req, enc.mediaType)
	began := false
	write := func(rev int64, cont string, objs []runtime.Object) error {
		if !began {
			began = true
			if err := enc.begin(out, rev, cont); err != nil {
				return err
			}
		}
		return enc.items(out, objs)
	}
	err := st.readList(ctx, opts, enc.parts, write)
	if err == nil {
		err = enc.end(out)
	}
	if err == nil {
		err = out.close()
	}
	if err == nil {
		return
	}
	if !out.written() {
		responsewriters.ErrorNegotiated(st.listError(err), codecs, v1beta1.SchemeGroupVersion, w, req)
		return
	}
	// net/http resets the stream (or closes the connection) without
	// logging a panic of this value.
	panic(http.ErrAbortHandler)
}

// readList hands write the objects of the list opts ask for, a chunk at a
// time, with the list's revision and continue token: a page of up to
// pageRead objects (or one object by name) read whole by List, or any
// larger list scanned from one snapshot. parts, when not nil, are all of
// spec and status the writer reads (catalog.Parts): the objects are read
// with only those, unless a field selector needs more. write is called
// at least once.
func (st *storage) readList(ctx context.Context, opts *metainternalversion.ListOptions, parts *catalog.Parts, writeChunk func(rev int64, cont string, objs []runtime.Object) error) error {
	atLeast, err := checkList(opts)
	if err != nil {
		return err
	}
	first := true
	write := func(rev int64, cont string, objs []runtime.Object) error {
		if first {
			first = false
			if err := servesRevision(opts, atLeast, rev); err != nil {
				return err
			}
		}
		return writeChunk(rev, cont, objs)
	}
	pred := st.predicate(ctx, opts)
	if !selectsByMetadata(pred.field) {
		parts = nil
	}
	_, byName := pred.field.RequiresExactMatch("metadata.name")
	if (opts.Limit > 0 && opts.Limit <= pageRead) || (byName && opts.Continue == "") {
		objs, rev, cont, err := st.list(ctx, opts, parts)
		if err != nil {
			return err
		}
		return write(rev, cont, objs)
	}
	lo := catalog.ListOptions{Namespace: pred.namespace, Continue: opts.Continue, Limit: int(opts.Limit), Labels: pred.label, Parts: parts}
	var objs []runtime.Object
	return st.store.ScanRaw(ctx, st.kind, lo, func(rev int64, cont string, items []*catalog.RawObject) error {
		var err error
		if objs, err = st.appendMatching(objs[:0], items, pred); err != nil {
			return err
		}
		return write(rev, cont, objs)
	})
}

// selectsByMetadata says whether a field selector reads only metadata
// (or nothing).
func selectsByMetadata(sel fields.Selector) bool {
	for _, r := range sel.Requirements() {
		if !strings.HasPrefix(r.Field, "metadata.") {
			return false
		}
	}
	return true
}

// listError is the API's error for a failed read of a list.
func (st *storage) listError(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		// The list's own answer (servesRevision), through the scan's
		// wrapping.
		return &apierrors.StatusError{ErrStatus: status.Status()}
	}
	if _, ok := catalog.AsValidation(err); ok {
		return apierrors.NewBadRequest(err.Error())
	}
	if isExpired(err) {
		return apierrors.NewTimeoutError(fmt.Sprintf("%v: read the list in pages (limit and continue)", err), 1)
	}
	return st.apiError(err, "", false)
}

// lister is a resource's storage, whose lists listServer answers.
type lister interface{ lister() *storage }

func (st *storage) lister() *storage { return st }

// storageOf is the storage of a resource's REST storage, nil when it has
// none (a subresource's).
func storageOf(rs rest.Storage) *storage {
	if l, ok := rs.(lister); ok {
		return l.lister()
	}
	return nil
}
