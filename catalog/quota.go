package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/message"
)

// Quotas. An admin limits what a namespace may take: its instances, its
// bindings, its instances of one plan, and whether it may use paid plans;
// the default quota (namespace "") holds for every namespace without one
// of its own. The cluster's ResourceQuotas on
// count/serviceinstances.servicecatalog.k8s.io and
// count/servicebindings.servicecatalog.k8s.io limit the namespace too
// (resourcequotas.go): the strictest limit wins.
//
// They are checked once, here, in the transaction that creates the object
// (or gives an instance its plan), by catalog.admit_instance and
// catalog.admit_binding (migrations/catalog 0015): when a limit applies,
// the transaction takes the namespace's advisory lock before it counts,
// so creations in one namespace take turns and two never share the last
// place; with none it takes nothing. A lowered quota deletes nothing: new
// objects are refused until there is room.

// Quota is what a namespace (or, with Namespace "", every namespace
// without a quota of its own) may take. A nil limit is no limit.
type Quota struct {
	// Namespace is the namespace the quota is for; "" for the default.
	Namespace string `json:"namespace"`
	// Instances and Bindings bound the namespace's instances and bindings,
	// those being deleted included.
	Instances *int `json:"instances,omitempty"`
	Bindings  *int `json:"bindings,omitempty"`
	// PaidPlans says whether the namespace may create instances of plans
	// that are not free.
	PaidPlans bool `json:"paidPlans"`
	// Plans bound the namespace's instances of single plans.
	Plans     []PlanQuota `json:"plans,omitempty"`
	UpdatedAt time.Time   `json:"updatedAt"`
}

// PlanQuota bounds the instances of one plan.
type PlanQuota struct {
	// PlanID is the plan's id.
	PlanID string `json:"planID"`
	// Plan and Class are the external names of the plan and its class,
	// and PlanName the plan's object name, filled in when read. A quota
	// being set may name a cluster plan by Class and Plan instead of
	// PlanID.
	Plan      string `json:"plan,omitempty"`
	Class     string `json:"class,omitempty"`
	PlanName  string `json:"planName,omitempty"`
	Instances int    `json:"instances"`
}

// Where a limit comes from, as QuotaError.Source and Usage.Source say.
const (
	// SourceNamespace is the namespace's own quota.
	SourceNamespace = "namespace"
	// SourceDefault is the default quota.
	SourceDefault = "default"
	// SourceResourceQuota prefixes the name of a ResourceQuota of the
	// namespace: "ResourceQuota/objects".
	SourceResourceQuota = "ResourceQuota/"
	// SourceServer is the server's own bound (WithMaxBrokersPerNamespace).
	SourceServer = "server"
)

// Resources a QuotaError is about.
const (
	QuotaInstances = "instances"
	QuotaBindings  = "bindings"
	// QuotaBrokers is the bound of a namespace's own brokers.
	QuotaBrokers = "brokers"
	// QuotaPlan is the namespace's instances of one plan.
	QuotaPlan = "plan"
	// QuotaPaid is a paid plan in a namespace that may not use them.
	QuotaPaid = "paid"
)

// ReasonQuotaExceeded is the Ready reason of an instance recorded before
// its plan was offered whose plan, once offered, a quota refuses: it waits,
// unresolved, for room.
const ReasonQuotaExceeded = "QuotaExceeded"

// QuotaError refuses a creation a quota has no room for. Its Error is the
// sentence every door shows: "namespace team-a may have 10 instances and
// has 10".
type QuotaError struct {
	Namespace string
	// Resource is QuotaInstances, QuotaBindings, QuotaBrokers, QuotaPlan
	// or QuotaPaid.
	Resource string
	// Limit and Used are the limit and the namespace's count (of the plan's
	// instances, for QuotaPlan) when the creation came.
	Limit, Used int64
	// Source is where the limit comes from: SourceNamespace,
	// SourceDefault, or SourceResourceQuota and the ResourceQuota's name.
	Source string
	// Plan is the plan's external name and PlanName its object name, for
	// QuotaPlan and QuotaPaid; PlanNamespace is the plan's namespace ("" for
	// a cluster plan).
	Plan, PlanName, PlanNamespace string
}

func (e *QuotaError) Error() string {
	var s string
	switch e.Resource {
	case QuotaPaid:
		s = message.PaidPlanRefused(e.Namespace, e.Plan)
	case QuotaPlan:
		s = message.QuotaExceeded(e.Namespace, e.Limit, "instance", "plan "+e.Plan, e.Used)
	case QuotaBindings:
		s = message.QuotaExceeded(e.Namespace, e.Limit, "binding", "", e.Used)
	case QuotaBrokers:
		s = message.QuotaExceeded(e.Namespace, e.Limit, "broker", "", e.Used)
		if e.Source == SourceServer {
			return s + " (--" + MaxBrokersFlag + ")"
		}
	default:
		s = message.QuotaExceeded(e.Namespace, e.Limit, "instance", "", e.Used)
	}
	return s + message.QuotaFrom(e.Source == SourceDefault, e.ResourceQuota())
}

// ResourceQuota is the name of the ResourceQuota that refused, if one did.
func (e *QuotaError) ResourceQuota() string {
	if len(e.Source) > len(SourceResourceQuota) && e.Source[:len(SourceResourceQuota)] == SourceResourceQuota {
		return e.Source[len(SourceResourceQuota):]
	}
	return ""
}

// AsQuota finds a *QuotaError in err's chain.
func AsQuota(err error) (*QuotaError, bool) {
	var q *QuotaError
	ok := errors.As(err, &q)
	return q, ok
}

// SQLSTATEs of catalog.admit_instance and catalog.admit_binding.
const (
	quotaExceededCode = "BDQ01"
	paidPlanCode      = "BDQ02"
)

// quotaCodes are the SQLSTATEs quotaRefusal maps.
var quotaCodes = []string{quotaExceededCode, paidPlanCode}

// quotaRefusal maps a refusal of catalog.admit_instance or
// catalog.admit_binding to a *QuotaError about plan (nil for none); other
// errors go through mapErr.
func quotaRefusal(err error, plan *ServicePlan) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != quotaExceededCode && pgErr.Code != paidPlanCode) {
		return mapErr(err)
	}
	var d struct {
		Namespace, Resource, Source string
		Limit, Used                 int64
	}
	if jerr := json.Unmarshal([]byte(pgErr.Detail), &d); jerr != nil {
		return fmt.Errorf("quota refusal %q: %w", pgErr.Detail, jerr)
	}
	q := &QuotaError{Namespace: d.Namespace, Resource: d.Resource, Limit: d.Limit, Used: d.Used, Source: d.Source}
	if pgErr.Code == paidPlanCode {
		q.Resource = QuotaPaid
	}
	if plan != nil {
		q.Plan, q.PlanName, q.PlanNamespace = plan.Spec.ExternalName, plan.Name, plan.Namespace
	}
	return q
}

// admitInstance queues, in w, the quota check of an instance of plan (nil
// while it is not resolved) in namespace ns: a creation (creating) counts
// the namespace's instances, and a plan, the namespace's instances of it
// but self (an instance changing plan). A refusal fails the transaction
// with a *QuotaError. It goes before the transaction takes its revision:
// it may wait for the namespace's lock.
func admitInstance(w *txn, ns string, plan *ServicePlan, creating bool, self *string) {
	var planID *string
	paid := false
	if plan != nil {
		planID, paid = &plan.ID, !plan.Spec.Free
	}
	w.queueCheck(quotaCodes, func(err error) error { return quotaRefusal(err, plan) },
		`catalog.admit_instance($1, $2, $3, $4, $5)`, ns, planID, paid, creating, self)
	if creating {
		countedBeforeRevision(w, instancesLockSpace, ns)
	}
}

// admitBinding queues, in w, the quota check of a new binding in ns.
func admitBinding(w *txn, ns string) {
	w.queueCheck(quotaCodes, func(err error) error { return quotaRefusal(err, nil) }, `catalog.admit_binding($1)`, ns)
	countedBeforeRevision(w, bindingsLockSpace, ns)
}

// The first keys of the namespaces' advisory locks of their counts of
// instances and bindings (migrations/catalog 0015, 0017).
const (
	instancesLockSpace = 1903521601
	bindingsLockSpace  = 1903521602
)

// countedBeforeRevision queues, in w, the namespace's lock of a count in
// shared mode, which the count's trigger takes when the row is inserted
// (migrations/catalog 0017): the insert takes the transaction's revision,
// and holding it, the trigger would wait there for a creation under a
// limit in the namespace, which holds the lock exclusively. Taken with
// the checks, the wait comes before the revision, as admission's does.
func countedBeforeRevision(w *txn, space int, ns string) {
	w.queueCheck(nil, nil, `pg_advisory_xact_lock_shared($1, hashtext($2))`, space, ns)
}

// maxQuota is the largest limit a quota holds (PostgreSQL's integer).
const maxQuota = math.MaxInt32

// validateQuota checks a quota before it is stored, every problem at
// once.
func validateQuota(q *Quota) field.ErrorList {
	var errs field.ErrorList
	if q.Namespace != "" {
		errs = append(errs, validateNamespace(field.NewPath("namespace"), q.Namespace)...)
	}
	for _, l := range []struct {
		name string
		v    *int
	}{{"bindings", q.Bindings}, {"instances", q.Instances}} {
		if l.v != nil && (*l.v < 0 || *l.v > maxQuota) {
			errs = append(errs, bad(field.NewPath(l.name), fmt.Sprintf("must be from 0 to %d", maxQuota)))
		}
	}
	seen := map[string]bool{}
	for i, p := range q.Plans {
		path := field.NewPath("plans").Index(i)
		if p.PlanID == "" && p.Class != "" && p.Plan != "" {
			// Named: resolved when stored.
		} else if !IsID(p.PlanID) {
			errs = append(errs, bad(path.Child("planID"), "must be a plan's id, or give class and plan (external names)"))
		} else if seen[p.PlanID] {
			errs = append(errs, field.Duplicate(path.Child("planID"), p.PlanID))
		}
		seen[p.PlanID] = true
		if p.Instances < 0 || p.Instances > maxQuota {
			errs = append(errs, bad(path.Child("instances"), fmt.Sprintf("must be from 0 to %d", maxQuota)))
		}
	}
	return errs
}

// SetQuota stores a namespace's quota (the default with Namespace ""),
// replacing the one it had. Objects over a lowered limit stay; new ones
// are refused until there is room. Plans must exist.
func (s *Store) SetQuota(ctx context.Context, q *Quota) (*Quota, error) {
	if err := invalid(validateQuota(q)); err != nil {
		return nil, err
	}
	limits := make([]int32, len(q.Plans))
	for i, p := range q.Plans {
		limits[i] = int32(p.Instances)
	}
	_, err := s.write(ctx, func(w *txn) error {
		ids, err := quotaPlanIDs(ctx, w, q.Plans)
		if err != nil {
			return err
		}
		w.queue(nil, `INSERT INTO catalog.quotas (namespace, instances, bindings, paid_plans, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (namespace) DO UPDATE SET instances = $2, bindings = $3, paid_plans = $4, updated_at = $5`,
			q.Namespace, q.Instances, q.Bindings, q.PaidPlans, s.now().UTC())
		w.queue(nil, `DELETE FROM catalog.quota_plans WHERE namespace = $1`, q.Namespace)
		_, err = w.Exec(ctx, `INSERT INTO catalog.quota_plans (namespace, plan_id, instances)
			SELECT $1, id, n FROM unnest($2::uuid[], $3::int[]) AS p(id, n)`, q.Namespace, ids, limits)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return s.GetQuota(ctx, q.Namespace)
}

// quotaPlanIDsSQL finds, for each entry of a quota's plans (an id, or
// the external names of a cluster class and plan), the plan's id or NULL.
// Each way is a lookup by key: by id (validateQuota checked that an id is
// a UUID), or through the class's external name to its plans. One
// condition for both ways (a CASE, comparing the id as text) made every
// entry read every plan.
const quotaPlanIDsSQL = `SELECT coalesce(array_agg(coalesce(
		(SELECT p.id::text FROM catalog.service_plans p WHERE p.id = nullif(u.id, '')::uuid),
		(SELECT p.id::text FROM catalog.service_classes c JOIN catalog.service_plans p ON p.class_id = c.id
			WHERE u.id = '' AND c.namespace = '' AND c.external_name = u.class AND p.external_name = u.plan AND NOT p.removed
			LIMIT 1)) ORDER BY u.n), '{}')
	FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(id, class, plan, n)`

// quotaPlanIDs finds the plans of a quota being set, by id or by the
// external names of a cluster class and plan: every one that does not
// exist (or twice) is a field error.
func quotaPlanIDs(ctx context.Context, q querier, plans []PlanQuota) ([]string, error) {
	ids, keys, classes, names := make([]string, len(plans)), make([]string, len(plans)), make([]string, len(plans)), make([]string, len(plans))
	for i, p := range plans {
		ids[i], classes[i], names[i] = p.PlanID, p.Class, p.Plan
		// The id as PostgreSQL writes it; one that is none is no plan's.
		if IsID(p.PlanID) {
			keys[i] = strings.ToLower(p.PlanID)
		}
	}
	var found []*string
	if err := q.QueryRow(ctx, quotaPlanIDsSQL, keys, classes, names).Scan(&found); err != nil {
		return nil, mapErr(err)
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, id := range found {
		path := field.NewPath("plans").Index(i)
		switch {
		case id == nil && ids[i] != "":
			errs = append(errs, bad(path.Child("planID"), "no plan has this id"))
		case id == nil:
			errs = append(errs, bad(path.Child("plan"), fmt.Sprintf("the cluster's service class %q offers no plan %q", classes[i], names[i])))
		case seen[*id]:
			errs = append(errs, bad(path, "names a plan named before"))
		default:
			seen[*id], ids[i] = true, *id
		}
	}
	return ids, invalid(errs)
}

// GetQuota reads a namespace's own quota ("" for the default);
// ErrNotFound when it has none.
func (s *Store) GetQuota(ctx context.Context, namespace string) (*Quota, error) {
	qs, err := s.quotas(ctx, []string{namespace})
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("%w: no quota of namespace %q", ErrNotFound, namespace)
	}
	return qs[0], nil
}

// ListQuotas lists every quota, the default first.
func (s *Store) ListQuotas(ctx context.Context) ([]*Quota, error) {
	return s.quotas(ctx, nil)
}

// quotas reads the quotas of namespaces (nil: all), by namespace.
func (s *Store) quotas(ctx context.Context, namespaces []string) ([]*Quota, error) {
	rows, err := s.pool.Query(ctx, `SELECT q.namespace, q.instances, q.bindings, q.paid_plans, q.updated_at,
			coalesce((SELECT jsonb_agg(jsonb_build_object('planID', p.id, 'plan', p.external_name, 'planName', p.name,
				'class', c.external_name, 'instances', qp.instances) ORDER BY c.external_name, p.external_name)
				FROM catalog.quota_plans qp JOIN catalog.service_plans p ON p.id = qp.plan_id
				JOIN catalog.service_classes c ON c.id = p.class_id WHERE qp.namespace = q.namespace), '[]')
		FROM catalog.quotas q WHERE $1::text[] IS NULL OR q.namespace = ANY($1) ORDER BY q.namespace`, namespaces)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Quota, error) {
		q := &Quota{}
		var plans []byte
		if err := row.Scan(&q.Namespace, &q.Instances, &q.Bindings, &q.PaidPlans, &q.UpdatedAt, &plans); err != nil {
			return nil, err
		}
		return q, json.Unmarshal(plans, &q.Plans)
	})
	return out, mapErr(err)
}

// DeleteQuota removes a namespace's own quota (the default quota, or none,
// then holds for it); ErrNotFound when it has none.
func (s *Store) DeleteQuota(ctx context.Context, namespace string) error {
	_, err := s.write(ctx, func(w *txn) error {
		tag, err := w.Exec(ctx, `DELETE FROM catalog.quotas WHERE namespace = $1`, namespace)
		if err != nil {
			return mapErr(err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: no quota of namespace %q", ErrNotFound, namespace)
		}
		return nil
	})
	return err
}
