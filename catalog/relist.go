package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bindery-dev/bindery/internal/osb"
)

// Broker condition reasons, and the messages Service Catalog v0.3.1 wrote
// with them (pkg/controller/controller_clusterservicebroker.go): a broker
// has only the Ready condition.
const (
	ReasonFetchedCatalog       = "FetchedCatalog"
	ReasonErrorFetchingCatalog = "ErrorFetchingCatalog"
	ReasonErrorSyncingCatalog  = "ErrorSyncingCatalog"

	msgFetchedCatalog       = "Successfully fetched catalog entries from broker."
	msgErrorFetchingCatalog = "Error fetching catalog. Error getting broker catalog: "
	msgErrorSyncingCatalog  = "Error syncing catalog from ClusterServiceBroker. "
	// msgErrorSyncingNamespaced is msgErrorSyncingCatalog for a ServiceBroker.
	msgErrorSyncingNamespaced = "Error syncing catalog from ServiceBroker. "
)

// BrokerClient returns an OSB client for a broker, with its credentials.
func (s *Store) BrokerClient(ctx context.Context, b *Broker) (*osb.Client, error) {
	var auth *BrokerAuth
	var err error
	if ref := b.Spec.SecretRef(); ref != nil {
		auth, err = s.secretAuth(ctx, b.Spec.AuthInfo, ref)
	} else {
		auth, err = s.BrokerAuth(ctx, b.ID)
	}
	if err != nil {
		return nil, err
	}
	// The client's own timeout stays OSB's 60 s (operations may take that
	// long); catalogue fetches are bounded by the broker timeout instead.
	cfg := osb.Config{URL: b.Spec.URL, CABundle: []byte(b.Spec.CABundle), InsecureSkipTLSVerify: b.Spec.InsecureSkipTLSVerify, Egress: s.egress}
	if auth != nil && auth.Basic != nil {
		cfg.Username, cfg.Password = auth.Basic.Username, auth.Basic.Password
	}
	if auth != nil && auth.Bearer != nil {
		cfg.Token = auth.Bearer.Token
	}
	return osb.New(cfg)
}

// secretAuth reads credentials from the Secret a broker's authInfo names:
// keys username and password for basic auth, token for a bearer token.
func (s *Store) secretAuth(ctx context.Context, info *BrokerAuthInfo, ref *ObjectRef) (*BrokerAuth, error) {
	if s.secrets == nil {
		return nil, fmt.Errorf("credentials in Secret %s/%s: this process has no cluster to read them from", ref.Namespace, ref.Name)
	}
	data, err := s.secrets.SecretData(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("credentials in Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	need := func(key string) (string, error) {
		if v := data[key]; len(v) > 0 {
			return string(v), nil
		}
		return "", fmt.Errorf("credentials in Secret %s/%s: no key %q", ref.Namespace, ref.Name, key)
	}
	if info.Basic != nil {
		user, err := need("username")
		if err != nil {
			return nil, err
		}
		pass, err := need("password")
		if err != nil {
			return nil, err
		}
		return &BrokerAuth{Basic: &BasicAuth{Username: user, Password: pass}}, nil
	}
	token, err := need("token")
	if err != nil {
		return nil, err
	}
	return &BrokerAuth{Bearer: &BearerAuth{Token: token}}, nil
}

// Relist fetches a broker's catalogue and stores its classes and plans in
// the broker's order. Services and plans the broker no longer offers (or
// that its catalog restrictions filter out) are marked removed; ones that
// come back are restored. A broker that cannot be reached, or answers
// garbage, keeps everything already stored: its status says why, and the
// relister tries again with backoff. The error is returned as well.
func (s *Store) Relist(ctx context.Context, id string) (*Broker, error) {
	b, err := getBy[Broker](ctx, s.pool, `id = $1`, id)
	if err != nil {
		return nil, err
	}
	if ref := b.Spec.SecretRef(); ref != nil && s.secrets == nil {
		// Left to the engine, which reads the Secret: a failure recorded
		// here would only blame this process and delay the engine's fetch.
		return nil, fmt.Errorf("%w: broker %s keeps its credentials in Secret %s/%s, which only the engine reads; it fetches the catalogue when due",
			ErrUnprocessable, b.Name, ref.Namespace, ref.Name)
	}
	fetchCtx, cancel := context.WithTimeout(ctx, s.brokerTimeout)
	defer cancel()
	client, err := s.BrokerClient(fetchCtx, b)
	var services []osb.Service
	if err == nil {
		services, err = client.Catalog(fetchCtx)
	}
	if err != nil {
		if ctx.Err() != nil {
			// Cancelled (a shutdown, a client that went away): the broker
			// still gets a status and a next attempt, or it would be left
			// without either until someone relists it by hand. The caller
			// gets it, to answer with, beside the error.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer rcancel()
			recorded, _ := s.relistFailed(rctx, id, ReasonErrorFetchingCatalog, errors.New("the catalogue fetch was cancelled before the broker answered"))
			return recorded, ctx.Err()
		}
		if osb.IsTimeout(err) {
			err = fmt.Errorf("the broker did not answer within %s: %w", s.brokerTimeout, err)
		}
		return s.relistFailed(ctx, id, ReasonErrorFetchingCatalog, err)
	}
	out, err := s.storeCatalog(ctx, id, services)
	if err != nil {
		if v, ok := AsValidation(err); ok {
			return s.relistFailed(ctx, id, ReasonErrorSyncingCatalog, v)
		}
		if errors.Is(err, ErrConflict) {
			return s.relistFailed(ctx, id, ReasonErrorSyncingCatalog, err)
		}
		return nil, err
	}
	s.refreshIcons(ctx, id)
	return out, nil
}

// backoff is the wait before retrying a broker that failed n times in a
// row: 5 s doubling, capped at the relist interval (or 10 minutes), with
// jitter.
func backoff(n int, limit time.Duration) time.Duration {
	if limit <= 0 || limit > 10*time.Minute {
		limit = 10 * time.Minute
	}
	d := 5 * time.Second
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}

func relistInterval(spec BrokerSpec) time.Duration {
	if spec.RelistBehavior != RelistDuration {
		return 0
	}
	d, err := time.ParseDuration(spec.RelistDuration)
	if err != nil {
		return DefaultRelistDuration
	}
	return d
}

func (s *Store) relistFailed(ctx context.Context, id, reason string, cause error) (*Broker, error) {
	var out *Broker
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Broker](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		var failures int
		if err := w.QueryRow(ctx, `UPDATE catalog.brokers SET relist_failures = relist_failures + 1 WHERE id = $1 RETURNING relist_failures`, id).Scan(&failures); err != nil {
			return mapErr(err)
		}
		now := s.now().UTC()
		next := now.Add(backoff(failures, relistInterval(b.Spec)))
		prefix := msgErrorSyncingCatalog
		if b.Namespace != "" {
			prefix = msgErrorSyncingNamespaced
		}
		if reason == ReasonErrorFetchingCatalog {
			prefix = msgErrorFetchingCatalog
		}
		msg := fmt.Sprintf("%s%s (attempt %d; next at %s)", prefix, cause.Error(), failures, next.Format(time.RFC3339))
		SetCondition(&b.Status.Conditions, Condition{Type: ConditionReady, Status: ConditionFalse, Reason: reason, Message: msg}, now)
		b.Status.NextRelistTime = &next
		if _, err := w.Exec(ctx, `UPDATE catalog.brokers SET status = $2, next_relist_at = $3, relist_claimed_until = NULL WHERE id = $1`,
			id, mustJSON(b.Status), next); err != nil {
			return mapErr(err)
		}
		if err := addEvent(ctx, w, b.kind(), id, "Warning", reason, msg, ""); err != nil {
			return err
		}
		w.changed(Modified, b)
		out = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.log.WarnContext(ctx, "catalog fetch failed", "broker", out.Name, "reason", reason, "error", cause)
	return out, fmt.Errorf("relist broker %s: %w", out.Name, cause)
}

// objectName is a Kubernetes name for an OSB id: the id itself when it is
// a valid name, otherwise a hash of it.
func objectName(externalID string) string {
	if len(validation.IsDNS1123Subdomain(externalID)) == 0 && len(externalID) <= 63 {
		return externalID
	}
	sum := sha256.Sum256([]byte(externalID))
	return "h-" + hex.EncodeToString(sum[:20])
}

// restrictions are a broker's parsed catalog restrictions.
type restrictions struct{ classes, plans []labels.Selector }

func parseRestrictions(r *CatalogRestrictions) restrictions {
	var out restrictions
	if r == nil {
		return out
	}
	for _, req := range r.ServiceClass {
		if sel, err := labels.Parse(req); err == nil {
			out.classes = append(out.classes, sel)
		}
	}
	for _, req := range r.ServicePlan {
		if sel, err := labels.Parse(req); err == nil {
			out.plans = append(out.plans, sel)
		}
	}
	return out
}

func matchAll(sels []labels.Selector, fields labels.Set) bool {
	for _, sel := range sels {
		if !sel.Matches(fields) {
			return false
		}
	}
	return true
}

// storeCatalog writes a fetched catalogue: one batch, one transaction,
// one revision.
func (s *Store) storeCatalog(ctx context.Context, id string, services []osb.Service) (*Broker, error) {
	var out *Broker
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Broker](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		f := &filter{}
		f.add("broker_id = ?", id)
		classes, err := list[ServiceClass](ctx, w, f, "position", nil, nil, ListOptions{})
		if err != nil {
			return err
		}
		plans, err := list[ServicePlan](ctx, w, f, "position", nil, nil, ListOptions{})
		if err != nil {
			return err
		}
		oldClasses := map[string]*ServiceClass{}
		for _, c := range classes.Items {
			oldClasses[c.Spec.ExternalID] = c
		}
		oldPlans := map[string]*ServicePlan{}
		for _, p := range plans.Items {
			oldPlans[p.Spec.ExternalID] = p
		}
		now := s.now().UTC()
		restrict := parseRestrictions(b.Spec.CatalogRestrictions)
		batch := &pgx.Batch{}
		seenClass, seenPlan := map[string]bool{}, map[string]bool{}
		nClasses, nPlans := 0, 0
		for i, svc := range services {
			class := classOf(b, svc)
			if !matchAll(restrict.classes, labels.Set{"name": class.Name, "spec.externalName": svc.Name, "spec.externalID": svc.ID}) {
				continue
			}
			seenClass[svc.ID] = true
			nClasses++
			if old, ok := oldClasses[svc.ID]; ok {
				class.Meta = old.Meta
				if sameJSON(old.Spec, class.Spec) && !old.Status.RemovedFromBrokerCatalog && old.Name == class.Name {
					batch.Queue(`UPDATE catalog.service_classes SET position = $2, osb = $3 WHERE id = $1`, old.ID, i, []byte(svc.Raw))
				} else {
					batch.Queue(`UPDATE catalog.service_classes SET position = $2, osb = $3, spec = $4, status = '{}', removed = false,
						external_name = $5 WHERE id = $1`, old.ID, i, []byte(svc.Raw), mustJSON(class.Spec), svc.Name)
					w.changed(Modified, class)
				}
			} else {
				class.ID, class.CreationTimestamp, class.Generation = uuid.NewString(), now, 1
				batch.Queue(`INSERT INTO catalog.service_classes (id, broker_id, name, external_id, external_name, position, spec, status, osb, resource_version, created_at, namespace)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, $11)`,
					class.ID, id, class.Name, svc.ID, svc.Name, i, mustJSON(class.Spec), mustJSON(class.Status), []byte(svc.Raw), now, b.Namespace)
				w.changed(Added, class)
			}
			for j, p := range svc.Plans {
				plan := planOf(b, class, p)
				free := plan.Spec.Free
				fields := labels.Set{"name": plan.Name, "spec.externalName": p.Name, "spec.externalID": p.ID,
					"spec.free": strconv.FormatBool(free), "spec.clusterServiceClass.name": class.Name, "spec.serviceClass.name": class.Name}
				if !matchAll(restrict.plans, fields) {
					continue
				}
				seenPlan[p.ID] = true
				nPlans++
				pos := i*10000 + j
				if old, ok := oldPlans[p.ID]; ok {
					plan.Meta = old.Meta
					if sameJSON(old.Spec, plan.Spec) && !old.Status.RemovedFromBrokerCatalog {
						batch.Queue(`UPDATE catalog.service_plans SET position = $2, osb = $3 WHERE id = $1`, old.ID, pos, []byte(p.Raw))
					} else {
						batch.Queue(`UPDATE catalog.service_plans SET position = $2, osb = $3, spec = $4, status = '{}', removed = false,
							external_name = $5, free = $6, class_id = $7 WHERE id = $1`, old.ID, pos, []byte(p.Raw), mustJSON(plan.Spec), p.Name, free, class.ID)
						w.changed(Modified, plan)
					}
				} else {
					plan.ID, plan.CreationTimestamp, plan.Generation = uuid.NewString(), now, 1
					batch.Queue(`INSERT INTO catalog.service_plans (id, broker_id, class_id, name, external_id, external_name, position, free, spec, status, osb, resource_version, created_at, namespace)
						VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0, $12, $13)`,
						plan.ID, id, class.ID, plan.Name, p.ID, p.Name, pos, free, mustJSON(plan.Spec), mustJSON(plan.Status), []byte(p.Raw), now, b.Namespace)
					w.changed(Added, plan)
				}
			}
		}
		for ext, c := range oldClasses {
			if !seenClass[ext] && !c.Status.RemovedFromBrokerCatalog {
				c.Status.RemovedFromBrokerCatalog = true
				batch.Queue(`UPDATE catalog.service_classes SET removed = true, status = $2 WHERE id = $1`, c.ID, mustJSON(c.Status))
				w.changed(Modified, c)
			}
		}
		for ext, p := range oldPlans {
			if !seenPlan[ext] && !p.Status.RemovedFromBrokerCatalog {
				p.Status.RemovedFromBrokerCatalog = true
				batch.Queue(`UPDATE catalog.service_plans SET removed = true, status = $2 WHERE id = $1`, p.ID, mustJSON(p.Status))
				w.changed(Modified, p)
			}
		}
		if err := w.SendBatch(ctx, batch).Close(); err != nil {
			if errors.Is(mapErr(err), ErrConflict) {
				return fmt.Errorf("%w: a service or plan id of this broker is already offered by another broker (%v)", ErrConflict, err)
			}
			return mapErr(err)
		}
		msg := fmt.Sprintf("Fetched the catalog: %d services, %d plans.", nClasses, nPlans)
		SetCondition(&b.Status.Conditions, Condition{Type: ConditionReady, Status: ConditionTrue, Reason: ReasonFetchedCatalog, Message: msgFetchedCatalog}, now)
		b.Status.LastCatalogRetrievalTime = &now
		b.Status.ReconciledGeneration = b.Generation
		b.Status.ServiceClassCount, b.Status.ServicePlanCount = nClasses, nPlans
		var next *time.Time
		if d := relistInterval(b.Spec); d > 0 {
			t := now.Add(d)
			next = &t
		}
		b.Status.NextRelistTime = next
		if _, err := w.Exec(ctx, `UPDATE catalog.brokers SET status = $2, next_relist_at = $3, relist_failures = 0,
			relist_claimed_until = NULL WHERE id = $1`, id, mustJSON(b.Status), next); err != nil {
			return mapErr(err)
		}
		if err := addEvent(ctx, w, b.kind(), id, "Normal", ReasonFetchedCatalog, msg, ""); err != nil {
			return err
		}
		w.changed(Modified, b)
		out = b
		return nil
	})
	return out, err
}

// classOf is the service class a broker's catalogue entry describes, in
// the broker's namespace.
func classOf(b *Broker, svc osb.Service) *ServiceClass {
	class := &ServiceClass{Spec: ServiceClassSpec{
		ExternalName:         svc.Name,
		ExternalID:           svc.ID,
		Description:          svc.Description,
		Bindable:             svc.Bindable,
		BindingRetrievable:   svc.BindingsRetrievable,
		InstancesRetrievable: svc.InstancesRetrievable,
		PlanUpdatable:        svc.PlanUpdatable != nil && *svc.PlanUpdatable,
		AllowContextUpdates:  svc.AllowContextUpdates,
		Tags:                 svc.Tags,
		Requires:             svc.Requires,
		ExternalMetadata:     rawOrNil(svc.Metadata),
	}}
	class.Name, class.Namespace = objectName(svc.ID), b.Namespace
	if b.Namespace != "" {
		class.Spec.ServiceBrokerName = b.Name
	} else {
		class.Spec.ClusterServiceBrokerName = b.Name
	}
	return class
}

// planOf is the plan of class a broker's catalogue entry describes.
func planOf(b *Broker, class *ServiceClass, p osb.Plan) *ServicePlan {
	free := p.Free == nil || *p.Free
	plan := &ServicePlan{Spec: ServicePlanSpec{
		ExternalName:           p.Name,
		ExternalID:             p.ID,
		Description:            p.Description,
		Free:                   free,
		Bindable:               p.Bindable,
		PlanUpdatable:          p.PlanUpdateable,
		BindingRotatable:       p.BindingRotatable,
		MaximumPollingDuration: p.MaximumPollingDuration,
		ExternalMetadata:       rawOrNil(p.Metadata),
	}}
	if b.Namespace != "" {
		plan.Spec.ServiceBrokerName, plan.Spec.ServiceClassRef = b.Name, ObjectRef{Name: class.Name}
	} else {
		plan.Spec.ClusterServiceBrokerName, plan.Spec.ClusterServiceClassRef = b.Name, ObjectRef{Name: class.Name}
	}
	if p.MaintenanceInfo != nil {
		plan.Spec.MaintenanceInfo = &MaintenanceInfo{Version: p.MaintenanceInfo.Version, Description: p.MaintenanceInfo.Description}
	}
	if sc := p.Schemas; sc != nil {
		if si := sc.ServiceInstance; si != nil {
			if si.Create != nil {
				plan.Spec.InstanceCreateParameterSchema = rawOrNil(si.Create.Parameters)
			}
			if si.Update != nil {
				plan.Spec.InstanceUpdateParameterSchema = rawOrNil(si.Update.Parameters)
			}
		}
		if sb := sc.ServiceBinding; sb != nil && sb.Create != nil {
			plan.Spec.ServiceBindingCreateParameterSchema = rawOrNil(sb.Create.Parameters)
		}
	}
	plan.Name, plan.Namespace = objectName(p.ID), b.Namespace
	return plan
}

func rawOrNil(v any) json.RawMessage {
	switch v := v.(type) {
	case nil:
		return nil
	case map[string]any:
		if v == nil {
			return nil
		}
	}
	raw, err := json.Marshal(v)
	if err != nil || string(raw) == "null" {
		return nil
	}
	return raw
}

func sameJSON(a, b any) bool {
	return string(mustJSON(a)) == string(mustJSON(b))
}

// RunRelister relists every broker whose relist is due, until ctx ends.
// Each relist is claimed in the database first, so with several replicas
// one of them relists a given broker at a time.
func (s *Store) RunRelister(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for {
			id, err := s.claimRelist(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.WarnContext(ctx, "claim a relist", "error", err)
				}
				break
			}
			if id == "" {
				break
			}
			_, _ = s.Relist(ctx, id) // failures are in the broker's status and the log
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// claimRelist takes one due broker for this process for two minutes;
// brokers whose credentials are in Secrets only when the store reads them.
func (s *Store) claimRelist(ctx context.Context) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `UPDATE catalog.brokers SET relist_claimed_until = now() + interval '2 minutes'
		WHERE id = (SELECT id FROM catalog.brokers
			WHERE deletion_timestamp IS NULL AND next_relist_at <= now()
			  AND (relist_claimed_until IS NULL OR relist_claimed_until < now())
			  AND ($1 OR (spec #> '{authInfo,basic,secretRef}' IS NULL AND spec #> '{authInfo,bearer,secretRef}' IS NULL))
			ORDER BY next_relist_at LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED)
		RETURNING id`, s.secrets != nil).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, mapErr(err)
}
