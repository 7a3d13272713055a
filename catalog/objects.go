package catalog

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/pgtext"
)

// Reading objects: every table has the same leading columns, so one scan
// serves all kinds. The metadata is read from metadata_text, the jsonb's
// text kept beside it (migration 0023), which PostgreSQL need not write
// out afresh for each read.

func columns(kind string) string {
	switch kind {
	case KindServiceClass, KindServicePlan, KindNamespacedServiceClass, KindNamespacedServicePlan:
		return `id, name, namespace, metadata_text, spec, status, 1, resource_version, created_at, NULL::timestamptz, broker_id, position`
	default:
		return `id, name, namespace, metadata_text, spec, status, generation, resource_version, created_at, deletion_timestamp`
	}
}

// parts returns the object's Meta and where its spec and status decode.
func parts(obj object) (*Meta, any, any) {
	switch o := obj.(type) {
	case *Broker:
		return &o.Meta, &o.Spec, &o.Status
	case *ServiceClass:
		return &o.Meta, &o.Spec, &o.Status
	case *ServicePlan:
		return &o.Meta, &o.Spec, &o.Status
	case *Instance:
		return &o.Meta, &o.Spec, &o.Status
	case *Binding:
		return &o.Meta, &o.Spec, &o.Status
	}
	panic(fmt.Sprintf("catalog: unknown object %T", obj))
}

func scanInto(row pgx.Row, obj object) error {
	m, spec, status := parts(obj)
	var metaRaw, specRaw, statusRaw []byte
	var deleted *time.Time
	dest := []any{&m.ID, &m.Name, &m.Namespace, &metaRaw, &specRaw, &statusRaw,
		&m.Generation, &m.ResourceVersion, &m.CreationTimestamp, &deleted}
	if x, ok := obj.(interface{ extras() []any }); ok {
		dest = append(dest, x.extras()...)
	}
	if err := row.Scan(dest...); err != nil {
		return mapErr(err)
	}
	m.DeletionTimestamp = deleted
	if err := decodeMeta(metaRaw, m); err != nil {
		return fmt.Errorf("decode metadata of %s: %w", m.ID, err)
	}
	if err := json.Unmarshal(specRaw, spec); err != nil {
		return fmt.Errorf("decode spec of %s: %w", m.ID, err)
	}
	if err := json.Unmarshal(statusRaw, status); err != nil {
		return fmt.Errorf("decode status of %s: %w", m.ID, err)
	}
	return nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// getBy reads the object of T that where selects with args: ErrNotFound
// when there is none, as there is none for a text argument that no row
// can hold (see filter.add).
func getBy[T any, P interface {
	*T
	object
}](ctx context.Context, q querier, where string, args ...any) (P, error) {
	if unstorable(args) {
		return nil, ErrNotFound
	}
	obj := P(new(T))
	kind := obj.kind()
	row := q.QueryRow(ctx, `SELECT `+columns(kind)+` FROM `+tables[kind]+` WHERE `+where, args...)
	if err := scanInto(row, obj); err != nil {
		return nil, err
	}
	if w, ok := q.(*txn); ok {
		w.read(obj)
	}
	return obj, nil
}

// ListOptions select and page a list.
type ListOptions struct {
	// Namespace limits namespaced kinds to one namespace; "" means all.
	Namespace string
	// Namespaces, when not empty, limits namespaced kinds to these (a
	// token's namespaces).
	Namespaces []string
	// Namespaced lists the namespaced brokers, classes and plans
	// (ServiceBroker, …), limited as namespaced kinds are, rather than
	// the cluster's (ClusterServiceBroker, …).
	Namespaced bool
	// Limit is the page size; 0 means no limit.
	Limit int
	// MaxBytes, when positive, ends a page of raw objects (ListRaw,
	// ListClassesRaw, ListPlansRaw) early, with a Continue token, once its
	// objects hold this many bytes of JSON: a page of a huge catalogue is
	// bounded in bytes as well as in objects. A page holds at least one.
	MaxBytes int
	// Continue is the token from the previous page.
	Continue string
	// Labels, when not nil, selects objects by their labels (Kubernetes'
	// label selectors).
	Labels labels.Selector
	// Parts, when not nil, has a read of raw objects (ListRaw, ScanRaw)
	// ask PostgreSQL for only some members of each spec and status: a
	// list that shows a few fields of each object (kubectl's Table, a
	// list of metadata) is spared the text of whole documents, which
	// most of such a read's time went to.
	Parts *Parts
}

// Parts are the top-level members of spec and status a read asks for:
// Spec and Status those whose values are strings, SpecJSON and StatusJSON
// any others (objects, arrays, numbers, booleans). RawObject.Spec and
// Status then hold those the object has; a member whose value is null is
// left out. An object being deleted is read whole: what is shown of it
// then can depend on any of its status (the finalizers an API shows, for
// one).
//
// PostgreSQL hands a string member out as it is, while any jsonb value
// (a whole document, or a member that is one) is written out as text
// afresh; building a smaller document in SQL costs more than that.
type Parts struct {
	Spec, SpecJSON, Status, StatusJSON []string
}

// columnsFor is columns(kind), with spec and status read as parts says
// when it is not nil (scanRaw reads them): the whole documents, NULL
// unless the object is being deleted, then each member.
func columnsFor(kind string, parts *Parts) string {
	if parts == nil {
		return columns(kind)
	}
	whole := `NULL::jsonb, NULL::jsonb`
	if !offered(kind) {
		whole = `CASE WHEN deletion_timestamp IS NULL THEN NULL ELSE spec END, CASE WHEN deletion_timestamp IS NULL THEN NULL ELSE status END`
	}
	var b strings.Builder
	b.WriteString(whole)
	for _, m := range parts.members() {
		op := "->>"
		if m.json {
			op = "->"
		}
		fmt.Fprintf(&b, ", %s%s'%s'", m.column, op, m.name)
	}
	return strings.Replace(columns(kind), "spec, status", b.String(), 1)
}

// partsMember is one member Parts names.
type partsMember struct {
	column, name string
	json         bool
}

// members are the members of p in the order of their columns. Their names
// are written into the statement, so each must be a plain JSON member name
// (letters and digits), as the callers' constants are.
func (p *Parts) members() []partsMember {
	var out []partsMember
	for _, set := range []struct {
		column string
		json   bool
		names  []string
	}{{"spec", false, p.Spec}, {"spec", true, p.SpecJSON}, {"status", false, p.Status}, {"status", true, p.StatusJSON}} {
		for _, name := range set.names {
			if !memberName.MatchString(name) {
				panic(fmt.Sprintf("catalog: %q is not a member name", name)) // a programming error
			}
			out = append(out, partsMember{column: set.column, name: name, json: set.json})
		}
	}
	return out
}

var memberName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// List is one page of objects.
type List[T any] struct {
	Items []T `json:"items"`
	// Continue, when not empty, fetches the next page.
	Continue string `json:"continue,omitempty"`
	// ResourceVersion is the catalog revision the list was read at.
	ResourceVersion int64 `json:"resourceVersion,omitempty"`
}

// cursor is the position after the last item of a page.
type cursor struct {
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"n"`
	Pos       int    `json:"p,omitempty"`
	BrokerPos int    `json:"b,omitempty"`
	// ID is a class's or plan's (catalogueOrder).
	ID string `json:"i,omitempty"`
}

func encodeCursor(c cursor) string {
	raw, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// decodeCursor reads a continue token of a list ordered by order. Only
// what encodeCursor makes is taken: a name, no unknown field, a position
// a catalogue's can be (a PostgreSQL integer, not negative) and, for a
// list in its brokers' catalogue order, a broker id, which the statement
// compares as a UUID.
func decodeCursor(s, order string) (cursor, error) {
	var c cursor
	raw, err := base64.RawURLEncoding.DecodeString(s)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err != nil || dec.Decode(&c) != nil || dec.More() || c.Name == "" ||
		c.Pos < 0 || c.BrokerPos < 0 || c.Pos > math.MaxInt32 || c.BrokerPos > math.MaxInt32 ||
		pgtext.Problem(c.Namespace) != "" || pgtext.Problem(c.Name) != "" {
		return c, invalid(field.ErrorList{bad(field.NewPath("continue"), "is not a continue token from this API")})
	}
	if strings.HasPrefix(order, "broker_id") {
		if c.ID == "" {
			// A token of a release before ids broke ties resumes after
			// every row of its position, as it did.
			c.ID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
		}
		if !IsID(c.Name) || !IsID(c.ID) {
			return c, invalid(field.ErrorList{bad(field.NewPath("continue"), "is not a continue token from this API")})
		}
	}
	return c, nil
}

// filter builds a WHERE clause from conditions with numbered parameters.
type filter struct {
	conds []string
	args  []any
}

// unstorable tells whether one of a statement's arguments is text
// PostgreSQL cannot store (pgtext.Problem), which no row holds.
func unstorable(args []any) bool {
	for _, a := range args {
		if s, ok := a.(string); ok && pgtext.Problem(s) != "" {
			return true
		}
	}
	return false
}

// add adds a condition, its ? placeholders numbered for args. Every
// condition asks for rows that hold (or follow) its text arguments; text
// PostgreSQL cannot store (a NUL, invalid UTF-8: a name in a URL, say) is
// in no row, so such a condition selects nothing, and the database, which
// would refuse the statement, is not asked with it.
func (f *filter) add(cond string, args ...any) {
	if unstorable(args) {
		f.conds = append(f.conds, "false")
		return
	}
	for _, a := range args {
		f.args = append(f.args, a)
		cond = strings.Replace(cond, "?", fmt.Sprintf("$%d", len(f.args)), 1)
	}
	f.conds = append(f.conds, cond)
}

// scope limits a list of kind as opts say: a namespaced kind to the
// namespaces asked for, a cluster-scoped one to the rows of no namespace.
func (f *filter) scope(kind string, opts ListOptions) {
	switch kind {
	case KindBroker, KindServiceClass, KindServicePlan:
		f.add("namespace = ''")
		return
	case KindNamespacedBroker, KindNamespacedServiceClass, KindNamespacedServicePlan:
		f.add("namespace <> ''")
	}
	if opts.Namespace != "" {
		f.add("namespace = ?", opts.Namespace)
	}
	if len(opts.Namespaces) > 0 {
		f.add("namespace = ANY(?)", opts.Namespaces)
	}
}

// scopedKind is the kind a list of brokers, classes or plans reads: the
// cluster's, or the namespaced twin when opts ask for it.
func scopedKind(cluster, namespaced string, opts ListOptions) string {
	if opts.Namespaced {
		return namespaced
	}
	return cluster
}

func (f *filter) where() string {
	if len(f.conds) == 0 {
		return "true"
	}
	return strings.Join(f.conds, " AND ")
}

// pageRows queries one page of kind ordered by order (columns,
// comma-separated), after the continue cursor's position, and one row more
// than the limit, which says whether another page follows.
func pageRows(ctx context.Context, q querier, kind string, f *filter, order string, after func(*filter, cursor), opts ListOptions) (pgx.Rows, error) {
	sql, err := pageSQL(kind, f, order, after, opts)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, sql, f.args...)
	if err != nil {
		return nil, mapErr(err)
	}
	return rows, nil
}

// pageSQL is pageRows' statement; its arguments are f's.
func pageSQL(kind string, f *filter, order string, after func(*filter, cursor), opts ListOptions) (string, error) {
	if opts.Continue != "" {
		c, err := decodeCursor(opts.Continue, order)
		if err != nil {
			return "", err
		}
		after(f, c)
	}
	if err := f.addLabels(opts.Labels); err != nil {
		return "", err
	}
	sel := `SELECT ` + columnsFor(kind, opts.Parts) + ` FROM ` + tables[kind] + ` WHERE `
	// The largest limit, whose one row more would overflow, is no limit
	// either: no table holds that many rows.
	if opts.Limit == 0 || opts.Limit == math.MaxInt {
		return sel + f.where() + ` ORDER BY ` + order, nil
	}
	limit := fmt.Sprintf(" LIMIT %d", opts.Limit+1)
	if opts.Namespace != "" || len(opts.Namespaces) < 2 || !strings.HasPrefix(order, "namespace, ") {
		return sel + f.where() + ` ORDER BY ` + order + limit, nil
	}
	// A page of several namespaces (namespace = ANY, ordered by namespace
	// first) is each namespace's first rows, merged. PostgreSQL 15 cannot
	// read an index in order through = ANY on its first column: it read
	// every row of the namespaces and sorted them for a page (23–29 ms
	// for 50 among 33,000). Each namespace is an ordered, limited scan of
	// its own, so a page reads at most a page's rows from each.
	f.args = append(f.args, slices.Compact(slices.Sorted(slices.Values(opts.Namespaces))))
	return fmt.Sprintf(`SELECT page.* FROM unnest($%d::text[]) AS scope(ns)
		CROSS JOIN LATERAL (%snamespace = scope.ns AND %s ORDER BY %s%s) page ORDER BY %s%s`,
		len(f.args), sel, f.where(), order, limit, order, limit), nil
}

// list reads a page of kind ordered by order (columns, comma-separated),
// after the cursor's position.
func list[T any, P interface {
	*T
	object
}](ctx context.Context, q querier, f *filter, order string, after func(*filter, cursor), next func(P) cursor, opts ListOptions) (List[P], error) {
	var out List[P]
	opts.Parts = nil // typed objects are decoded whole
	rows, err := pageRows(ctx, q, P(new(T)).kind(), f, order, after, opts)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		obj := P(new(T))
		if err := scanInto(rows, obj); err != nil {
			return out, err
		}
		out.Items = append(out.Items, obj)
	}
	if err := rows.Err(); err != nil {
		return out, mapErr(err)
	}
	if opts.Limit > 0 && len(out.Items) > opts.Limit {
		out.Items = out.Items[:opts.Limit]
		out.Continue = encodeCursor(next(out.Items[len(out.Items)-1]))
	}
	if out.Items == nil {
		out.Items = []P{}
	}
	return out, nil
}

// getByIDOrName reads a broker, class or plan of a namespace ("" for the
// cluster's) by id or by name; OSB ids are often UUIDs, so a name may
// look like an id.
func getByIDOrName[T any, P interface {
	*T
	object
}](ctx context.Context, q querier, namespace, idOrName string) (P, error) {
	if IsID(idOrName) {
		return getBy[T, P](ctx, q, `namespace = $1 AND (id = $2::uuid OR name = $3)`, namespace, idOrName, idOrName)
	}
	return getBy[T, P](ctx, q, `namespace = $1 AND name = $2`, namespace, idOrName)
}

func updateMeta[T any, P interface {
	*T
	object
}](ctx context.Context, s *Store, id string, expectRV int64, fn func(*Meta) error) (P, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	var out P
	_, err := s.write(ctx, func(w *txn) error {
		obj, err := getBy[T, P](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		m := obj.meta()
		if expectRV != 0 && m.ResourceVersion != expectRV {
			return stale(obj.kind(), m.Namespace, m.Name)
		}
		before, err := encodeMeta(m)
		if err != nil {
			return err
		}
		name, ns := m.Name, m.Namespace
		finalizers := slices.Clone(m.Finalizers)
		if err := fn(m); err != nil {
			return err
		}
		m.Name, m.Namespace = name, ns
		setSpecLabels(obj)
		errs := validateMeta(m)
		if m.DeletionTimestamp != nil {
			// As Kubernetes: finalizers can go, but none can come, once a
			// delete was asked for.
			for i, f := range m.Finalizers {
				if !slices.Contains(finalizers, f) {
					errs = append(errs, field.Forbidden(field.NewPath("finalizers").Index(i), "no finalizer can be added while the object is being deleted"))
				}
			}
		}
		if err := invalid(errs); err != nil {
			return err
		}
		after, err := encodeMeta(m)
		if err != nil {
			return err
		}
		out = obj
		if string(before) == string(after) {
			return nil
		}
		if len(m.Finalizers) == 0 && Released(any(obj)) {
			// The last other finalizer is gone and the engine had finished:
			// the object goes, as Kubernetes deletes it then.
			if _, err := w.Exec(ctx, `DELETE FROM `+tables[obj.kind()]+` WHERE id = $1`, id); err != nil {
				return mapErr(err)
			}
			w.changed(Deleted, obj)
			return nil
		}
		if _, err := w.Exec(ctx, `UPDATE `+tables[obj.kind()]+` SET metadata = $2 WHERE id = $1`, id, after); err != nil {
			return mapErr(err)
		}
		w.changed(Modified, obj)
		return nil
	})
	return out, err
}
