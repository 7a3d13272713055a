package catalog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Reading objects: every table has the same leading columns, so one scan
// serves all kinds.

func columns(kind string) string {
	switch kind {
	case KindServiceClass, KindServicePlan:
		return `id, name, '', metadata, spec, status, 1, resource_version, created_at, NULL::timestamptz, broker_id, position`
	case KindBroker:
		return `id, name, '', metadata, spec, status, generation, resource_version, created_at, deletion_timestamp`
	default:
		return `id, name, namespace, metadata, spec, status, generation, resource_version, created_at, deletion_timestamp`
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
	var md metaDoc
	if err := json.Unmarshal(metaRaw, &md); err != nil {
		return fmt.Errorf("decode metadata of %s: %w", m.ID, err)
	}
	m.Labels, m.Annotations, m.Finalizers, m.Extra = md.Labels, md.Annotations, md.Finalizers, md.Extra
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

func getBy[T any, P interface {
	*T
	object
}](ctx context.Context, q querier, where string, args ...any) (P, error) {
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
	// Limit is the page size; 0 means no limit.
	Limit int
	// Continue is the token from the previous page.
	Continue string
}

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
}

func encodeCursor(c cursor) string {
	raw, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(raw, &c) != nil {
		return c, invalid(FieldError{Field: "continue", Message: "is not a continue token from this API"})
	}
	return c, nil
}

// filter builds a WHERE clause from conditions with numbered parameters.
type filter struct {
	conds []string
	args  []any
}

func (f *filter) add(cond string, args ...any) {
	for _, a := range args {
		f.args = append(f.args, a)
		cond = strings.Replace(cond, "?", fmt.Sprintf("$%d", len(f.args)), 1)
	}
	f.conds = append(f.conds, cond)
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
	if opts.Continue != "" {
		c, err := decodeCursor(opts.Continue)
		if err != nil {
			return nil, err
		}
		after(f, c)
	}
	sql := `SELECT ` + columns(kind) + ` FROM ` + tables[kind] + ` WHERE ` + f.where() + ` ORDER BY ` + order
	if opts.Limit > 0 {
		sql += fmt.Sprintf(" LIMIT %d", opts.Limit+1)
	}
	rows, err := q.Query(ctx, sql, f.args...)
	if err != nil {
		return nil, mapErr(err)
	}
	return rows, nil
}

// list reads a page of kind ordered by order (columns, comma-separated),
// after the cursor's position.
func list[T any, P interface {
	*T
	object
}](ctx context.Context, q querier, f *filter, order string, after func(*filter, cursor), next func(P) cursor, opts ListOptions) (List[P], error) {
	var out List[P]
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

// getByIDOrName reads a cluster-scoped object by id or by name; OSB ids are
// often UUIDs, so a name may look like an id.
func getByIDOrName[T any, P interface {
	*T
	object
}](ctx context.Context, q querier, idOrName string) (P, error) {
	if _, err := uuid.Parse(idOrName); err == nil {
		return getBy[T, P](ctx, q, `id = $1::uuid OR name = $2`, idOrName, idOrName)
	}
	return getBy[T, P](ctx, q, `name = $1`, idOrName)
}

// RawObject is an object read for listing: its metadata decoded, its spec
// and status left as the database holds them (valid JSON, written by this
// package), so a large list is not decoded and encoded again.
type RawObject struct {
	Meta
	Spec   json.RawMessage
	Status json.RawMessage
}

// AppendJSON appends the object as JSON: the same document its typed form
// gives, without re-encoding spec and status.
func (o *RawObject) AppendJSON(buf []byte) ([]byte, error) {
	meta, err := json.Marshal(&o.Meta)
	if err != nil {
		return nil, err
	}
	buf = append(buf, meta[:len(meta)-1]...)
	buf = append(buf, `,"spec":`...)
	buf = append(buf, o.Spec...)
	buf = append(buf, `,"status":`...)
	buf = append(buf, o.Status...)
	return append(buf, '}'), nil
}

// listRaw is list for RawObjects of a kind.
func listRaw(ctx context.Context, q querier, kind string, f *filter, order string, after func(*filter, cursor), next func(*RawObject, int, string) cursor, opts ListOptions) (List[*RawObject], error) {
	var out List[*RawObject]
	rows, err := pageRows(ctx, q, kind, f, order, after, opts)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	var lastPos int
	var lastBroker string
	for rows.Next() {
		o := &RawObject{}
		m := &o.Meta
		// Scanned as []byte: pgx copies jsonb into a byte slice as it is,
		// where a json.RawMessage would be decoded (and so validated) again.
		var metaRaw, spec, status []byte
		var deleted *time.Time
		dest := []any{&m.ID, &m.Name, &m.Namespace, &metaRaw, &spec, &status,
			&m.Generation, &m.ResourceVersion, &m.CreationTimestamp, &deleted}
		if kind == KindServiceClass || kind == KindServicePlan {
			dest = append(dest, &lastBroker, &lastPos)
		}
		if err := rows.Scan(dest...); err != nil {
			return out, mapErr(err)
		}
		m.DeletionTimestamp = deleted
		o.Spec, o.Status = spec, status
		var md metaDoc
		if err := json.Unmarshal(metaRaw, &md); err != nil {
			return out, err
		}
		m.Labels, m.Annotations, m.Finalizers, m.Extra = md.Labels, md.Annotations, md.Finalizers, md.Extra
		out.Items = append(out.Items, o)
		if opts.Limit > 0 && len(out.Items) == opts.Limit {
			out.Continue = encodeCursor(next(o, lastPos, lastBroker))
		}
	}
	if err := rows.Err(); err != nil {
		return out, mapErr(err)
	}
	if opts.Limit > 0 && len(out.Items) > opts.Limit {
		out.Items = out.Items[:opts.Limit]
	} else {
		out.Continue = ""
	}
	if out.Items == nil {
		out.Items = []*RawObject{}
	}
	return out, nil
}
