package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	apistorage "k8s.io/apiserver/pkg/storage"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// storage is the read side of one resource over the catalog: get, list and
// watch, and table output. The kinds that can be written embed it.
type storage struct {
	kind          string // the catalog's kind
	resource      schema.GroupResource
	singular      string
	shortNames    []string
	namespaced    bool
	newFn         func() runtime.Object
	newListFn     func() runtime.Object
	table         tableConvertor
	store         *catalog.Store
	hub           *hub
	bookmarkEvery time.Duration
	// access, for cluster plans, hides those restricted to namespaces
	// from the users who may not provision in them.
	access *planAccess
}

var (
	_ rest.Getter               = (*storage)(nil)
	_ rest.Lister               = (*storage)(nil)
	_ rest.Watcher              = (*storage)(nil)
	_ rest.Scoper               = (*storage)(nil)
	_ rest.SingularNameProvider = (*storage)(nil)
	_ rest.ShortNamesProvider   = (*storage)(nil)
	_ rest.CategoriesProvider   = (*storage)(nil)
)

// New returns an empty object of the resource.
func (st *storage) New() runtime.Object { return st.newFn() }

// NewList returns an empty list of the resource.
func (st *storage) NewList() runtime.Object { return st.newListFn() }

// Destroy has nothing to release: the store and hub belong to the server.
func (st *storage) Destroy() {}

// NamespaceScoped says whether the resource lives in namespaces.
func (st *storage) NamespaceScoped() bool { return st.namespaced }

// GetSingularName is the resource's singular name (kubectl explain uses it).
func (st *storage) GetSingularName() string { return st.singular }

// ShortNames are kubectl's abbreviations of the resource.
func (st *storage) ShortNames() []string { return st.shortNames }

// categories are the groups of resources every kind of the API belongs
// to, as Service Catalog declared them: `kubectl get all` and `kubectl get
// svcat` list them.
var categories = []string{"all", "svcat"}

// Categories are the groups kubectl expands to this resource.
func (st *storage) Categories() []string { return categories }

// ConvertToTable gives kubectl its columns.
func (st *storage) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return st.table.convert(ctx, obj, opts)
}

func (st *storage) groupKind() schema.GroupKind {
	kinds, _, _ := scheme.ObjectKinds(st.newFn())
	if len(kinds) == 0 {
		return schema.GroupKind{Group: v1beta1.GroupName}
	}
	return kinds[0].GroupKind()
}

func (st *storage) namespace(ctx context.Context) string {
	if !st.namespaced {
		return ""
	}
	return genericapirequest.NamespaceValue(ctx)
}

func (st *storage) apiError(err error, name string, creating bool) error {
	return apiError(err, st.resource, st.groupKind(), name, creating)
}

// Get reads one object. A resourceVersion asked for (at least that new)
// that the catalog has not reached is kube-apiserver's 504 for one newer
// than its cache.
func (st *storage) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	if opts != nil && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		if atLeast, err := strconv.ParseInt(opts.ResourceVersion, 10, 64); err == nil {
			if err := st.reached(ctx, atLeast); err != nil {
				return nil, err
			}
		}
	}
	raw, err := st.store.GetRaw(ctx, st.kind, st.namespace(ctx), name)
	if err != nil {
		return nil, st.apiError(err, name, false)
	}
	obj, err := fromRaw(st.kind, raw)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	st.hub.waitFor(ctx, raw.ResourceVersion)
	hide, narrow := st.access.view(ctx)
	if hide.object(obj) {
		return nil, apierrors.NewNotFound(st.resource, name)
	}
	return narrow.object(obj), nil
}

// reached checks that the catalog's final revision (once the writes in
// flight have ended) is at least atLeast (tooNew).
func (st *storage) reached(ctx context.Context, atLeast int64) error {
	rev, err := st.store.Revision(ctx)
	if err != nil {
		return st.apiError(err, "", false)
	}
	return tooNew(atLeast, rev)
}

// tooNew refuses a resourceVersion atLeast beyond the catalog's final
// revision rev as kube-apiserver refuses one newer than its cache: 504,
// a Timeout whose cause (ResourceVersionTooLarge) client-go's reflector
// acts on.
func tooNew(atLeast, rev int64) error {
	if atLeast > rev {
		return apistorage.NewTooLargeResourceVersionError(uint64(atLeast), uint64(rev), 1)
	}
	return nil
}

// settled waits until obj's resourceVersion is final (hub.waitFor) and
// returns it.
func (st *storage) settled(ctx context.Context, obj runtime.Object) runtime.Object {
	if rv, err := resourceVersion(obj); err == nil {
		st.hub.waitFor(ctx, rv)
	}
	return obj
}

// predicate is a list's or watch's selection.
type predicate struct {
	namespace string
	label     labels.Selector
	field     fields.Selector
	// hide, when not nil, leaves out what the user may not see (a cluster
	// plan restricted to namespaces: planAccess), and narrow what they may
	// not read of what they see.
	hide   planHider
	narrow planNarrower
}

// storableSelector refuses a field selector value PostgreSQL cannot hold
// (a NUL, invalid UTF-8) with 400 naming the field: a selection by name or
// namespace is looked up in the database, which would refuse the query.
// A label selector too large for the catalog's statements
// (catalog.CheckLabels) is 400 as well, before a watch begins.
func storableSelector(opts *metainternalversion.ListOptions) error {
	if opts == nil {
		return nil
	}
	if err := catalog.CheckLabels(opts.LabelSelector); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if opts.FieldSelector == nil {
		return nil
	}
	for _, r := range opts.FieldSelector.Requirements() {
		if p := pgtext.Problem(r.Value); p != "" {
			return apierrors.NewBadRequest(fmt.Sprintf("fieldSelector: the value of %s %s", r.Field, p))
		}
	}
	return nil
}

// predicate is what a request of ctx with opts selects: its namespace,
// its selectors, and none of the cluster's plans hidden from its user.
func (st *storage) predicate(ctx context.Context, opts *metainternalversion.ListOptions) predicate {
	p := newPredicate(st.namespace(ctx), opts)
	p.hide, p.narrow = st.access.view(ctx)
	return p
}

func newPredicate(ns string, opts *metainternalversion.ListOptions) predicate {
	p := predicate{namespace: ns, label: labels.Everything(), field: fields.Everything()}
	if opts != nil && opts.LabelSelector != nil {
		p.label = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		p.field = opts.FieldSelector
	}
	if p.namespace == "" {
		if ns, ok := p.field.RequiresExactMatch("metadata.namespace"); ok {
			p.namespace = ns
		}
	}
	return p
}

func (p predicate) matches(obj runtime.Object) bool {
	if p.hide.object(obj) {
		return false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if p.namespace != "" && m.GetNamespace() != p.namespace {
		return false
	}
	if !p.label.Empty() && !p.label.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	return p.field.Empty() || p.field.Matches(v1beta1.SelectableFields(obj))
}

func (p predicate) matchesAttrs(a *attrs) bool {
	if p.namespace != "" && a.namespace() != p.namespace {
		return false
	}
	if !p.label.Empty() && !p.label.Matches(a.labels) {
		return false
	}
	return p.field.Empty() || p.field.Matches(a.fields)
}

// selects says whether the predicate looks at what a change can change
// (labels, fields), not only the namespace.
func (p predicate) selects() bool { return !p.label.Empty() || !p.field.Empty() }

// transition is the event a watch with this predicate sends for a change,
// if any. As kube-apiserver's watch cache does, a MODIFIED object that
// starts matching is ADDED, and one that stops matching is DELETED (with
// its new state); when the state before the change is unknown (ev.prev
// nil), the object is taken to have matched as it does now, unless the
// feed pruned it (ev.pruned): one that does not match now is DELETED, for
// the watcher may hold it, and a DELETED of what it does not hold is
// nothing to it.
func (p predicate) transition(ev hubEvent) (watch.EventType, bool) {
	if p.hide.object(ev.obj) {
		// Hidden from the watcher now: a change that hid what it saw
		// (known from the state before it) is DELETED; of what it never
		// saw, or may not have, it learns nothing, not even that it
		// changed.
		if ev.typ == watch.Modified && ev.prev != nil && !p.hide.before(ev.prev) && p.matchesAttrs(ev.prev) {
			return watch.Deleted, true
		}
		return "", false
	}
	cur := p.matches(ev.obj)
	if cur && ev.typ == watch.Modified && ev.prev != nil && p.hide.before(ev.prev) {
		// Made visible to the watcher: new to it.
		return watch.Added, true
	}
	if ev.typ == watch.Modified && ev.pruned && !cur && p.selects() {
		return watch.Deleted, true
	}
	if ev.typ != watch.Modified || ev.prev == nil || !p.selects() {
		return ev.typ, cur
	}
	switch was := p.matchesAttrs(ev.prev); {
	case cur && was:
		return watch.Modified, true
	case cur:
		return watch.Added, true
	case was:
		return watch.Deleted, true
	}
	return "", false
}

// event is the event a watch with this predicate sends for a change, if
// any, carrying sent (the change's object as it is sent). A plan hidden
// from the watcher by the change is sent as no more than its name and
// resourceVersion: its state now (the namespaces it is restricted to, its
// spec) is not the watcher's to read. One it sees is sent narrowed
// (planNarrower), a copy of its own then.
func (p predicate) event(ev hubEvent, sent runtime.Object) (watch.Event, bool) {
	typ, ok := p.transition(ev)
	if ok && typ == watch.Deleted && ev.typ == watch.Modified && p.hide.object(ev.obj) {
		sent = tombstone(ev.obj)
	} else if n := p.narrow.object(ev.obj); n != ev.obj {
		sent = n
	}
	return watch.Event{Type: typ, Object: sent}, ok
}

// tombstone is a cluster plan reduced to what names it.
func tombstone(obj runtime.Object) runtime.Object {
	p, ok := obj.(*v1beta1.ClusterServicePlan)
	if !ok {
		return obj
	}
	return &v1beta1.ClusterServicePlan{TypeMeta: p.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion}}
}

// List reads a page of objects, filtered by label and field selectors.
// The catalog selects by label (in SQL, through an index); field selectors
// are applied to what it returns: with a limit, List then reads on (at most
// fillReads times) while the page is short and the catalog has more, as
// kube-apiserver's own storage does. A page can still come back short with
// a continue token when a field selector matches few objects (the API
// conventions allow it; client-go's pager and kubectl follow continue). The
// page's resourceVersion is that of its first read.
func (st *storage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	if opts == nil {
		opts = &metainternalversion.ListOptions{}
	}
	atLeast, err := checkList(opts)
	if err != nil {
		return nil, err
	}
	objs, rev, cont, err := st.list(ctx, opts, nil)
	if err != nil {
		return nil, err
	}
	if err := servesRevision(opts, atLeast, rev); err != nil {
		return nil, err
	}
	list := st.newListFn()
	if err := meta.SetList(list, objs); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	lm.SetResourceVersion(strconv.FormatInt(rev, 10))
	lm.SetContinue(cont)
	return list, nil
}

// checkList refuses what a list's options ask that the catalog cannot
// read (storableSelector) and returns the revision its resourceVersion
// names: 0 for none ("", the newest, or "0", any), 400 for one that is no
// revision. A continued list is read as its first page was asked for: a
// resourceVersion with continue is 400, as kube-apiserver answers it.
func checkList(opts *metainternalversion.ListOptions) (int64, error) {
	if err := storableSelector(opts); err != nil {
		return 0, err
	}
	switch opts.ResourceVersion {
	case "", "0":
		return 0, nil
	}
	if opts.Continue != "" {
		return 0, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	n, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
	if err != nil || n < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: a list's resourceVersion is one the server gave", opts.ResourceVersion))
	}
	return n, nil
}

// servesRevision checks that a list read at revision rev is what opts ask
// for (the API conventions' resource version semantics): with
// resourceVersionMatch=Exact the list must be of that revision, and the
// catalog keeps no older ones (410 Gone, as kube-apiserver answers for a
// compacted one); otherwise it must be at least as new as the revision
// asked for (504 with the cause client-go's reflector waits on, as
// kube-apiserver answers one newer than it has).
func servesRevision(opts *metainternalversion.ListOptions, atLeast, rev int64) error {
	switch {
	case atLeast == 0 || atLeast == rev:
		return nil
	case atLeast > rev:
		return tooNew(atLeast, rev)
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact:
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d): the catalog lists only its newest revision", atLeast, rev))
	}
	return nil
}

// list reads List's page: its objects, its revision and its continue
// token, reading of each object's spec and status only parts when parts
// is not nil (catalog.Parts). An object read by name is read whole.
func (st *storage) list(ctx context.Context, opts *metainternalversion.ListOptions, parts *catalog.Parts) (objs []runtime.Object, rev int64, cont string, err error) {
	pred := st.predicate(ctx, opts)
	objs = []runtime.Object{}
	if name, ok := pred.field.RequiresExactMatch("metadata.name"); ok && opts.Continue == "" &&
		(!st.namespaced || pred.namespace != "") {
		// kubectl wait and delete ask for one object by name.
		if rev, err = st.store.Revision(ctx); err != nil {
			return nil, 0, "", st.apiError(err, "", false)
		}
		raw, err := st.store.GetRaw(ctx, st.kind, pred.namespace, name)
		switch {
		case err == nil:
			if objs, err = st.appendMatching(objs, []*catalog.RawObject{raw}, pred); err != nil {
				return nil, 0, "", err
			}
		case !apierrors.IsNotFound(st.apiError(err, name, false)):
			return nil, 0, "", st.apiError(err, name, false)
		}
	} else {
		limit := int(opts.Limit)
		// The label selector is answered by the catalog (in SQL); field
		// selectors are applied here.
		lo := catalog.ListOptions{Namespace: pred.namespace, Continue: opts.Continue, Limit: limit, Labels: pred.label, Parts: parts}
		filtered := !pred.field.Empty() || pred.hide != nil
		for read := 1; ; read++ {
			l, err := st.store.ListRaw(ctx, st.kind, lo)
			if err != nil {
				if _, ok := catalog.AsValidation(err); ok {
					return nil, 0, "", apierrors.NewBadRequest(err.Error())
				}
				return nil, 0, "", st.apiError(err, "", false)
			}
			if read == 1 {
				rev = l.ResourceVersion
			}
			if objs, err = st.appendMatching(objs, l.Items, pred); err != nil {
				return nil, 0, "", err
			}
			cont = l.Continue
			if !filtered || limit == 0 || cont == "" || len(objs) >= limit || read == fillReads {
				break
			}
			// The next read asks for what the page lacks, so the page never
			// overflows and its continue token stays exact.
			lo.Continue, lo.Limit = cont, limit-len(objs)
		}
	}
	return objs, rev, cont, nil
}

// fillReads bounds the catalog reads of one filtered page.
const fillReads = 8

// appendMatching converts raw objects and appends those pred matches.
func (st *storage) appendMatching(objs []runtime.Object, items []*catalog.RawObject, pred predicate) ([]runtime.Object, error) {
	for _, r := range items {
		obj, err := fromRaw(st.kind, r)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if pred.matches(obj) {
			objs = append(objs, pred.narrow.object(obj))
		}
	}
	return objs, nil
}

// Watch follows the change feed from the requested resourceVersion: from
// "" or "0" it first sends the current objects as ADDED, unless
// sendInitialEvents=false asks it to start from now.
func (st *storage) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	if err := storableSelector(opts); err != nil {
		return nil, err
	}
	req := watchRequest{pred: st.predicate(ctx, opts)}
	rv, noInitial := "", false
	if opts != nil {
		rv = opts.ResourceVersion
		req.bookmarks = opts.AllowWatchBookmarks
		noInitial = opts.SendInitialEvents != nil && !*opts.SendInitialEvents
		if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
			// The server defaults sendInitialEvents for a watch without a
			// resourceVersion; only a watch that also allows bookmarks (a
			// watch-list request) is told where the initial events end.
			req.initial, req.initialMark = true, opts.AllowWatchBookmarks
		}
	}
	switch {
	case (rv == "" || rv == "0") && noInitial:
		// No initial events and no revision: from now on, as
		// kube-apiserver's watch cache starts such a watch.
		from, err := st.store.Revision(ctx)
		if err != nil {
			return nil, st.apiError(err, "", false)
		}
		req.from = from
	case rv == "" || rv == "0":
		req.initial = true
	default:
		from, err := strconv.ParseInt(rv, 10, 64)
		if err != nil || from < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
		}
		req.from = from
	}
	return st.startWatch(ctx, req), nil
}

// resourceVersion reads an object's resourceVersion: 0 when it has none.
func resourceVersion(obj runtime.Object) (int64, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	rv := m.GetResourceVersion()
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
	}
	return n, nil
}

func isDryRun(dryRun []string) bool { return len(dryRun) > 0 }
