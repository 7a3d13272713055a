package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Objects as stored, for the Kubernetes API: spec and status left as the
// database holds them, and lists read at one revision.

// GetRaw reads one object of kind by namespace (namespaced kinds only) and
// name, spec and status left as stored.
func (s *Store) GetRaw(ctx context.Context, kind, namespace, name string) (*RawObject, error) {
	if _, ok := tables[kind]; !ok {
		return nil, fmt.Errorf("get %s: unknown kind", kind)
	}
	f := &filter{}
	f.scope(kind, ListOptions{})
	if namespaced(kind) {
		f.add("namespace = ?", namespace)
	}
	f.add("name = ?", name)
	l, err := listRaw(ctx, s.pool, kind, f, "name", nil, nil, ListOptions{})
	if err != nil {
		return nil, err
	}
	if len(l.Items) == 0 {
		return nil, ErrNotFound
	}
	return l.Items[0], nil
}

// rawOrder is how a list of a kind is ordered and paged: by the columns of
// order, resuming after a cursor (after), the cursor of an item (next).
type rawOrder struct {
	order string
	after func(*filter, cursor)
	next  func(o *RawObject, pos int, broker string) cursor
	// upTo ends a read at a cursor's position, included.
	upTo func(*filter, cursor)
}

// rawOrders are the orders of the kinds, as their own List methods order
// them: by namespace and name, classes and plans as their broker's
// catalogue lists them.
var rawOrders = func() map[string]rawOrder {
	byName := rawOrder{
		order: "namespace, name",
		after: func(f *filter, c cursor) { f.add("(namespace, name) > (?, ?)", c.Namespace, c.Name) },
		next:  func(o *RawObject, _ int, _ string) cursor { return cursor{Namespace: o.Namespace, Name: o.Name} },
		upTo:  func(f *filter, c cursor) { f.add("(namespace, name) <= (?, ?)", c.Namespace, c.Name) },
	}
	byPosition := rawOrder{order: catalogueOrder, after: afterInCatalogue, next: rawInCatalogue, upTo: uptoInCatalogue}
	out := map[string]rawOrder{}
	for _, k := range []string{KindInstance, KindBinding, KindBroker, KindNamespacedBroker} {
		out[k] = byName
	}
	for _, k := range []string{KindServiceClass, KindServicePlan, KindNamespacedServiceClass, KindNamespacedServicePlan} {
		out[k] = byPosition
	}
	return out
}()

// ListRaw lists objects of kind in the order of their own List method
// (classes and plans removed from their broker's catalogue included), in a
// read-only snapshot whose revision it returns as ResourceVersion: a watch
// from that revision sees every change the list does not.
func (s *Store) ListRaw(ctx context.Context, kind string, opts ListOptions) (List[*RawObject], error) {
	var out List[*RawObject]
	o, ok := rawOrders[kind]
	if !ok {
		return out, fmt.Errorf("list %s: unknown kind", kind)
	}
	f := &filter{}
	f.scope(kind, opts)
	err := s.snapshot(ctx, func(ctx context.Context, tx pgx.Tx, rev int64) error {
		var err error
		out, err = listRaw(ctx, tx, kind, f, o.order, o.after, o.next, opts)
		out.ResourceVersion = rev
		return err
	})
	if err != nil {
		return out, fmt.Errorf("list %s: %w", kind, err)
	}
	return out, nil
}

// namespaced tells whether objects of kind live in a namespace.
func namespaced(kind string) bool {
	switch kind {
	case KindInstance, KindBinding, KindNamespacedBroker, KindNamespacedServiceClass, KindNamespacedServicePlan:
		return true
	}
	return false
}

// offered tells whether kind is a class or plan, which their broker's
// catalogue orders.
func offered(kind string) bool {
	switch kind {
	case KindServiceClass, KindServicePlan, KindNamespacedServiceClass, KindNamespacedServicePlan:
		return true
	}
	return false
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
	rs := newRowScan(opts.Parts)
	var size int
	var position cursor
	full := false
	for rows.Next() {
		if opts.MaxBytes > 0 && size >= opts.MaxBytes {
			// Full in bytes, and another object follows.
			out.Continue, full = encodeCursor(position), true
			rows.Close()
			break
		}
		o, n, err := rs.scan(rows, kind)
		if err != nil {
			return out, err
		}
		size += n
		if next != nil {
			position = next(o, rs.pos, rs.broker)
		}
		out.Items = append(out.Items, o)
		if opts.Limit > 0 && len(out.Items) == opts.Limit {
			out.Continue = encodeCursor(position)
		}
	}
	if err := rows.Err(); err != nil {
		return out, mapErr(err)
	}
	if opts.Limit > 0 && len(out.Items) > opts.Limit {
		out.Items = out.Items[:opts.Limit]
	} else if !full {
		out.Continue = ""
	}
	if out.Items == nil {
		out.Items = []*RawObject{}
	}
	return out, nil
}

// partsScan is where the members of a read of Parts are scanned, for
// each row in turn.
type partsScan struct {
	members []partsMember
	values  []pgtype.DriverBytes // the driver's, until rows.Next
	dests   []any                // a pointer to each of values
}

// newPartsScan is the partsScan of a read of parts, nil for a read of
// whole objects.
func newPartsScan(parts *Parts) *partsScan {
	if parts == nil {
		return nil
	}
	m := parts.members()
	ps := &partsScan{members: m, values: make([]pgtype.DriverBytes, len(m)), dests: make([]any, len(m))}
	for i := range ps.values {
		ps.dests[i] = &ps.values[i]
	}
	return ps
}

// rowScan reads the rows of one read: with ps the parts' members (nil
// when whole), meta the metadata's reader, and of a class or plan the
// broker and position of the last row.
type rowScan struct {
	ps     *partsScan
	meta   *metaReader
	broker string
	pos    int
}

// newRowScan is a rowScan of parts (nil: whole objects).
func newRowScan(parts *Parts) *rowScan {
	return &rowScan{ps: newPartsScan(parts), meta: newMetaReader()}
}

// scan reads a RawObject from rows, of the columns columnsFor(kind,
// parts) with rs.ps the parts', and how many bytes of JSON it holds.
func (rs *rowScan) scan(rows pgx.Rows, kind string) (*RawObject, int, error) {
	ps := rs.ps
	o := &RawObject{}
	m := &o.Meta
	// Scanned as []byte: pgx copies jsonb into a byte slice as it is,
	// where a json.RawMessage would be decoded (and so validated) again.
	var metaRaw, spec, status []byte
	var deleted *time.Time
	var members []any
	if ps != nil {
		members = ps.dests
	}
	dest := make([]any, 0, 12+len(members))
	dest = append(dest, &m.ID, &m.Name, &m.Namespace, &metaRaw, &spec, &status)
	dest = append(dest, members...)
	dest = append(dest, &m.Generation, &m.ResourceVersion, &m.CreationTimestamp, &deleted)
	if offered(kind) {
		dest = append(dest, &rs.broker, &rs.pos)
	}
	if err := rows.Scan(dest...); err != nil {
		return nil, 0, mapErr(err)
	}
	m.DeletionTimestamp = deleted
	if ps != nil && spec == nil {
		spec, status = ps.assemble("spec"), ps.assemble("status")
	}
	o.Spec, o.Status = spec, status
	if err := rs.meta.decode(metaRaw, m); err != nil {
		return nil, 0, fmt.Errorf("decode metadata of %s: %w", m.ID, err)
	}
	return o, len(metaRaw) + len(spec) + len(status), nil
}

// assemble is the JSON object of the members of column read apart (NULL
// for a member the object does not have): a string member's value is its
// text, any other's its JSON.
func (ps *partsScan) assemble(column string) []byte {
	values := ps.values
	buf := []byte{'{'}
	for i, mb := range ps.members {
		if mb.column != column || values[i] == nil || (mb.json && string(values[i]) == "null") {
			continue
		}
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf, _ = jsontext.AppendQuote(buf, mb.name)
		buf = append(buf, ':')
		if mb.json {
			buf = append(buf, values[i]...)
		} else {
			buf, _ = jsontext.AppendQuote(buf, values[i])
		}
	}
	return append(buf, '}')
}
