package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// OfferingFilter selects the services a marketplace page shows.
type OfferingFilter struct {
	// Query keeps services whose name, display name, provider or
	// description, or one of whose plans' names or descriptions, has it
	// (case-insensitively).
	Query string
	// Tag is one of the service's tags.
	Tag string
	// Broker is a cluster broker's name, or namespace/name for a
	// namespace's own broker.
	Broker string
	// Free keeps services with at least one free (true) or paid (false)
	// plan.
	Free *bool
	// Namespaces, when not empty, are the only namespaces whose own
	// services are shown beside the cluster's (a token's namespaces).
	Namespaces []string
}

// Offering is a service on a marketplace page, with the number of its
// plans (all, and free) offered: to a session of some namespaces, those
// visible to one of them (VisibleInAnnotation).
type Offering struct {
	Class     *ServiceClass
	Plans     int
	FreePlans int
}

// Offerings reads a page of the services offered, limit from offset, with
// how many match in all: the cluster's first, then each namespace's own,
// every broker's in its catalogue order. Only services that have a plan
// offered are shown. Reading a page costs the same whatever the
// catalogue's size: the plans are counted, not read.
func (s *Store) Offerings(ctx context.Context, f OfferingFilter, offset, limit int) ([]Offering, int, error) {
	w := offeringWhere(f)
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM catalog.service_classes WHERE `+w.where(), w.args...).Scan(&total); err != nil {
		return nil, 0, mapErr(err)
	}
	args := append(w.args, limit, offset)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT %s FROM catalog.service_classes WHERE %s
		ORDER BY namespace, broker_id, position, id LIMIT $%d OFFSET $%d`, columns(KindServiceClass), w.where(), len(args)-1, len(args)), args...)
	if err != nil {
		return nil, 0, mapErr(err)
	}
	var out []Offering
	index := map[string]int{}
	ids := []string{}
	for rows.Next() {
		c := &ServiceClass{}
		if err := scanInto(rows, c); err != nil {
			rows.Close()
			return nil, 0, err
		}
		index[c.ID] = len(out)
		ids = append(ids, c.ID)
		out = append(out, Offering{Class: c})
	}
	if err := rows.Err(); err != nil {
		return nil, 0, mapErr(err)
	}
	if len(ids) == 0 {
		return out, total, nil
	}
	var visibleTo []string // nil: every plan counts
	if len(f.Namespaces) > 0 {
		visibleTo = f.Namespaces
	}
	rows, err = s.pool.Query(ctx, `SELECT class_id::text, count(*), count(*) FILTER (WHERE free) FROM catalog.service_plans
		WHERE class_id = ANY($1::uuid[]) AND NOT removed AND ($2::text[] IS NULL OR catalog.plan_visible(metadata, $2))
		GROUP BY class_id`, ids, visibleTo)
	if err != nil {
		return nil, 0, mapErr(err)
	}
	var id string
	var plans, free int
	if _, err := pgx.ForEachRow(rows, []any{&id, &plans, &free}, func() error {
		out[index[id]].Plans, out[index[id]].FreePlans = plans, free
		return nil
	}); err != nil {
		return nil, 0, mapErr(err)
	}
	return out, total, nil
}

// offeringWhere is the filter of Offerings.
func offeringWhere(f OfferingFilter) *filter {
	w := &filter{}
	w.add("NOT removed")
	if len(f.Namespaces) > 0 {
		w.add("(namespace = '' OR namespace = ANY(?))", f.Namespaces)
	}
	if f.Broker != "" {
		ns, name, found := strings.Cut(f.Broker, "/")
		if !found {
			ns, name = "", f.Broker
		}
		w.add("namespace = ? AND broker_id = (SELECT b.id FROM catalog.brokers b WHERE b.namespace = ? AND b.name = ?)", ns, ns, name)
	}
	if f.Tag != "" {
		w.add("spec->'tags' @> jsonb_build_array(?::text)", f.Tag)
	}
	// A plan offered is one not removed and, to a session of some
	// namespaces, visible to one of them.
	plan := "EXISTS (SELECT 1 FROM catalog.service_plans p WHERE p.class_id = service_classes.id AND NOT p.removed"
	var visible []any
	if len(f.Namespaces) > 0 {
		plan += " AND catalog.plan_visible(p.metadata, ?)"
		visible = []any{f.Namespaces}
	}
	if f.Free != nil {
		w.add(plan+" AND p.free = ?)", append(visible, *f.Free)...)
	} else {
		w.add(plan+")", visible...)
	}
	if q := strings.TrimSpace(f.Query); q != "" {
		like := "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(q) + "%"
		args := append([]any{like, like, like, like}, visible...)
		w.add(`(external_name ILIKE ? OR spec->>'description' ILIKE ? OR spec #>> '{externalMetadata,displayName}' ILIKE ?
			OR spec #>> '{externalMetadata,providerDisplayName}' ILIKE ? OR `+plan+` AND (p.external_name ILIKE ? OR p.spec->>'description' ILIKE ?)))`,
			append(args, like, like)...)
	}
	return w
}

// OfferedTags are the tags of the services offered to a session of
// namespaces (every namespace's when empty): those the marketplace shows,
// in order, at most limit of them.
func (s *Store) OfferedTags(ctx context.Context, namespaces []string, limit int) ([]string, error) {
	w := offeringWhere(OfferingFilter{Namespaces: namespaces})
	args := append(w.args, limit)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT DISTINCT t FROM catalog.service_classes, jsonb_array_elements_text(spec->'tags') t
		WHERE %s ORDER BY t LIMIT $%d`, w.where(), len(args)), args...)
	if err != nil {
		return nil, mapErr(err)
	}
	tags, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return tags, mapErr(err)
}
