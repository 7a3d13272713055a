package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/backoff"
	"github.com/bindery-dev/bindery/internal/message"
	"github.com/bindery-dev/bindery/internal/osb"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// Broker condition reasons, and the messages Service Catalog v0.3.1 wrote
// with them (pkg/controller/controller_clusterservicebroker.go): a broker
// has only the Ready condition.
const (
	ReasonFetchedCatalog       = "FetchedCatalog"
	ReasonErrorFetchingCatalog = "ErrorFetchingCatalog"
	ReasonErrorSyncingCatalog  = "ErrorSyncingCatalog"

	msgFetchedCatalog = "Successfully fetched catalog entries from broker."
)

// fetchProblem words why a broker's catalogue was not fetched (reason
// ErrorFetchingCatalog: the broker did not answer, or answered an error)
// or not stored (ErrorSyncingCatalog: what it sent is invalid, with the
// fields' paths in its document, which its authors need).
func (s *Store) fetchProblem(b *Broker, reason string, cause error) string {
	var he *osb.HTTPError
	switch {
	case reason != ReasonErrorFetchingCatalog:
		if m, ok := ProblemMessage(cause); ok {
			return "The catalogue of broker " + b.Name + " cannot be stored: " + m
		}
		return "The catalogue of broker " + b.Name + " cannot be stored: " + strings.TrimSuffix(cause.Error(), ".") + "."
	case osb.IsTimeout(cause):
		return fmt.Sprintf("Broker %s did not answer within %s: check that it is running and not overloaded.", b.Name, s.brokerTimeout)
	case errors.As(cause, &he) && (he.Status == 401 || he.Status == 403):
		return fmt.Sprintf("Broker %s refused Bindery's credentials (%s): check the user name and password, or the bearer token, it was registered with.", b.Name, strings.TrimSuffix(cause.Error(), "."))
	case errors.As(cause, &he):
		return fmt.Sprintf("Broker %s answered its catalogue request with an error: %s.", b.Name, strings.TrimSuffix(cause.Error(), "."))
	}
	return "Bindery could not fetch the catalogue of broker " + b.Name + ". " + message.Unreachable(b.Spec.URL, cause)
}

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

// relist is one fetch of a broker's catalogue (Relist says what it does).
func (s *Store) relist(ctx context.Context, id string) (*Broker, error) {
	last := true
	for attempt := 1; ; attempt++ {
		out, err := s.relistOnce(ctx, id, last)
		if !errors.Is(err, errStaleCatalogue) {
			return out, err
		}
		if attempt == maxStaleFetches {
			return s.relistFailed(ctx, id, ReasonErrorFetchingCatalog,
				fmt.Errorf("the broker's spec changed during each of %d fetches of its catalogue", attempt))
		}
		// The broker's spec changed while its catalogue was fetched:
		// fetched again, whole, for the spec as it is now.
		last = false
	}
}

// errStaleCatalogue is a fetch made for a generation of the broker's spec
// that is no longer its own, or that found the catalogue stored last (a
// 304 to its ETag, or the same document) when that no longer names what
// the broker's rows were stored from.
var errStaleCatalogue = errors.New("catalogue stored last is stale")

// maxStaleFetches bounds the fetches of one relist that a broker's spec
// changing under them makes stale: a spec change asks for a relist of its
// own, which runs after this one.
const maxStaleFetches = 3

// relistOnce is relist, the broker asked with what was kept of the
// catalogue stored last when last is set and it still applies.
func (s *Store) relistOnce(ctx context.Context, id string, last bool) (*Broker, error) {
	b, err := getBy[Broker](ctx, s.pool, `id = $1`, id)
	if err != nil {
		return nil, err
	}
	if ref := b.Spec.SecretRef(); ref != nil && s.secrets == nil {
		// Left to the engine, which reads the Secret: a failure recorded
		// here would only blame this process and delay the engine's fetch.
		return nil, unprocessablef("Broker %s keeps its credentials in Secret %s/%s, which only the engine reads: the engine fetches its catalogue when due.",
			b.Name, ref.Namespace, ref.Name)
	}
	var known osb.Fetched
	if last {
		stored, err := readStoredCatalogue(ctx, s.pool, id)
		if err != nil {
			return nil, err
		}
		if stored.validFor(b) {
			known = osb.Fetched{ETag: stored.etag, Digest: stored.digest}
		}
	}
	fetchCtx, cancel := context.WithTimeout(ctx, s.brokerTimeout)
	defer cancel()
	client, err := s.BrokerClient(fetchCtx, b)
	var cat *osb.Catalogue
	if err == nil {
		cat, err = client.Catalog(fetchCtx, known)
	}
	if err != nil {
		return s.fetchFailed(ctx, id, err)
	}
	out, err := s.storeCatalog(ctx, id, b.Generation, cat)
	if err != nil {
		return s.storeFailed(ctx, b, cat, err)
	}
	return out, nil
}

// storeFailed records a fetched catalogue that could not be stored, as
// relistFailed records any failed fetch, whatever the cause: a problem of
// the catalogue, a conflict, or the database's refusal (a value out of
// range, a full disk). A failure left unrecorded would keep the broker's
// last success in its status and its relist claimed until the claim ran
// out, to be tried again at once, without a backoff, at the cost of
// another fetch and store. Only a catalogue fetched for a spec the broker
// no longer has is not a failure: relist fetches again.
func (s *Store) storeFailed(ctx context.Context, b *Broker, cat *osb.Catalogue, err error) (*Broker, error) {
	if v, ok := AsValidation(err); ok {
		return s.relistFailed(ctx, b.ID, ReasonErrorSyncingCatalog, v)
	}
	switch {
	case errors.Is(err, errStaleCatalogue):
		return nil, err
	case errors.Is(err, errDuplicateOffer):
		err = s.duplicateOffer(ctx, b, cat)
	case ctx.Err() != nil:
		// As fetchFailed: recorded all the same, the caller gets ctx's
		// error beside the broker.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		recorded, _ := s.relistFailed(rctx, b.ID, ReasonErrorSyncingCatalog, errors.New("the catalogue's storing was cancelled before it was done"))
		return recorded, ctx.Err()
	}
	return s.relistFailed(ctx, b.ID, ReasonErrorSyncingCatalog, err)
}

// fetchFailed records a catalogue fetch that failed with err.
func (s *Store) fetchFailed(ctx context.Context, id string, err error) (*Broker, error) {
	if ctx.Err() != nil {
		// Cancelled (a shutdown, clients that went away): the broker
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

// storedCatalogue is what a broker's classes and plans were stored from
// last (migrations/catalog 0029, 0030).
type storedCatalogue struct {
	digest     []byte
	generation *int64
	etag       string
	format     *int32
}

// catalogueFormat is the version of how a catalogue document becomes rows:
// what osb.Client.Catalog checks of it and what classOf and planOf store.
// A release that changes either bumps it, so that the rows of a document
// stored before, which relists would otherwise leave as they are, are
// checked and written again (migrations/catalog 0030).
const catalogueFormat = 1

func readStoredCatalogue(ctx context.Context, q querier, id string) (storedCatalogue, error) {
	var sc storedCatalogue
	var current bool
	err := q.QueryRow(ctx, `SELECT catalogue_digest, catalogue_generation, coalesce(catalogue_etag, ''), catalogue_format,
			coalesce(catalogue_stored_at = status->>'lastCatalogRetrievalTime', false)
		FROM catalog.brokers WHERE id = $1`, id).Scan(&sc.digest, &sc.generation, &sc.etag, &sc.format, &current)
	if !current {
		// Another store moved the retrieval time since (migrations/catalog
		// 0029): none of it applies.
		return storedCatalogue{}, mapErr(err)
	}
	return sc, mapErr(err)
}

// validFor says the rows were stored for b's generation (its catalog
// restrictions, and whatever else of its spec they depend on, are the
// same) by a release that makes them as this one does.
func (sc storedCatalogue) validFor(b *Broker) bool {
	return sc.digest != nil && sc.generation != nil && *sc.generation == b.Generation &&
		sc.format != nil && *sc.format == catalogueFormat
}

// unchanged says a relist of b that fetched cat would store the rows as
// they are: the same document (a 304 to its ETag is its digest).
func (sc storedCatalogue) unchanged(b *Broker, cat *osb.Catalogue) bool {
	return sc.validFor(b) && bytes.Equal(cat.Digest, sc.digest)
}

// relistBackoff is the wait before retrying a broker that failed n times
// in a row: 5 s doubling, capped at the relist interval (or 10 minutes),
// less up to half of it at random (the one formula, internal/backoff).
func relistBackoff(n int, limit time.Duration) time.Duration {
	if limit <= 0 || limit > 10*time.Minute {
		limit = 10 * time.Minute
	}
	return backoff.Delay(5*time.Second, limit, n, rand.Float64()/2)
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
		if err := w.QueryRow(ctx, `UPDATE catalog.brokers SET relist_failures = relist_failures + 1, relists_failed = relists_failed + 1
			WHERE id = $1 RETURNING relist_failures`, id).Scan(&failures); err != nil {
			return mapErr(err)
		}
		now := s.now().UTC()
		next := now.Add(relistBackoff(failures, relistInterval(b.Spec)))
		// The problem (a broker's words among them) is cut so that the
		// message keeps its next attempt within MaxMessage.
		suffix := fmt.Sprintf(" Bindery tries again at %s (attempt %d).", next.Format(time.RFC3339), failures)
		msg := pgtext.Clip(s.fetchProblem(b, reason, cause), MaxMessage-len(suffix)) + suffix
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

// storeCatalog writes a fetched catalogue: one transaction, a revision per
// change, written a chunk of services at a time (catalogueWriter). The catalogue
// was fetched for the broker's spec of generation fetchedFor: one fetched
// for another is errStaleCatalogue (from another URL, say).
func (s *Store) storeCatalog(ctx context.Context, id string, fetchedFor int64, cat *osb.Catalogue) (*Broker, error) {
	var out *Broker
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Broker](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		if b.Generation != fetchedFor {
			return errStaleCatalogue
		}
		stored, err := readStoredCatalogue(ctx, w, id)
		if err != nil {
			return err
		}
		cw := &catalogueWriter{w: w, b: b, now: s.now().UTC(), restrict: parseRestrictions(b.Spec.CatalogRestrictions),
			seenClass: map[string]bool{}, seenPlan: map[string]bool{}}
		// counted is the fetch's column of migrations/catalog 0030.
		counted := "relists_stored"
		switch {
		case stored.unchanged(b, cat):
			// Most fetches: the rows are left as they are, unread.
			counted = "relists_unchanged"
			if cat.NotModified {
				counted = "relists_not_modified"
			}
			err = cw.keepStored(ctx)
		case cat.Same:
			return errStaleCatalogue
		default:
			err = cw.write(ctx, cat)
		}
		if err != nil {
			return err
		}
		now := cw.now
		// A cluster broker's Events are read by every namespace's
		// viewers, to some of whom some of its plans do not exist: its
		// counts are in its status, which each reader gets as it sees
		// them (PlansVisibleIn).
		msg := msgFetchedCatalog
		if b.Namespace != "" {
			msg = fmt.Sprintf("Fetched the catalog: %d services, %d plans.", cw.nClasses, cw.nPlans)
		}
		SetCondition(&b.Status.Conditions, Condition{Type: ConditionReady, Status: ConditionTrue, Reason: ReasonFetchedCatalog, Message: msgFetchedCatalog}, now)
		b.Status.LastCatalogRetrievalTime = &now
		b.Status.ReconciledGeneration = b.Generation
		b.Status.ServiceClassCount, b.Status.ServicePlanCount = cw.nClasses, cw.nPlans
		var next *time.Time
		if d := relistInterval(b.Spec); d > 0 {
			t := now.Add(d)
			next = &t
		}
		b.Status.NextRelistTime = next
		if _, err := w.Exec(ctx, `UPDATE catalog.brokers SET status = $2, next_relist_at = $3, relist_failures = 0,
			`+counted+` = `+counted+` + 1, relist_claimed_until = NULL, catalogue_digest = $4, catalogue_generation = $5,
			catalogue_etag = nullif($6, ''), catalogue_last_modified = NULL, catalogue_format = $7,
			catalogue_stored_at = $2::jsonb->>'lastCatalogRetrievalTime' WHERE id = $1`,
			id, mustJSON(b.Status), next, cat.Digest, b.Generation, cat.ETag, catalogueFormat); err != nil {
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

// catalogueChunk is about how many bytes of a catalogue's JSON are written
// at once: the services of a chunk are decoded, compared with what is
// stored, written and staged for the change feed, then let go.
const catalogueChunk = 1 << 20

// catalogueWriter writes a catalogue into a transaction a chunk of
// services at a time, so that it holds one chunk's objects at a time; their
// change-feed documents are staged in the transaction as it goes
// (txn.stage).
type catalogueWriter struct {
	w        *txn
	b        *Broker
	now      time.Time
	restrict restrictions
	// seenClass and seenPlan are the external ids offered and kept.
	seenClass, seenPlan map[string]bool
	nClasses, nPlans    int
	pos                 positions
}

// positions hands out the positions of a catalogue's classes and plans,
// service by service in the broker's order: a class's is the number of
// services before it, a plan's the number of plans before it (those the
// catalog restrictions leave out count too), so they rise in the broker's
// order however many plans a service has. They fit the tables' integer
// columns: every service and plan takes bytes of a document of at most
// osb.MaxCatalog (32 MiB), far fewer than 2³¹.
type positions struct{ services, plans int }

// next is the position of the next service's class and that of the first
// of its plans; the others follow it.
func (p *positions) next(plans int) (class, firstPlan int) {
	class, firstPlan = p.services, p.plans
	p.services++
	p.plans += plans
	return class, firstPlan
}

// write writes cat's classes and plans a chunk at a time, then deals with
// those it no longer offers.
func (cw *catalogueWriter) write(ctx context.Context, cat *osb.Catalogue) error {
	for from := 0; from < cat.Len(); {
		to := from + 1
		for size := cat.ServiceSize(from); to < cat.Len() && size < catalogueChunk; to++ {
			size += cat.ServiceSize(to)
		}
		if err := cw.chunk(ctx, cat, from, to); err != nil {
			return err
		}
		from = to
	}
	return cw.removeUnseen(ctx)
}

// keepStored is what a fetch of the catalogue stored last does: its
// classes and plans stay as they are (those it does not offer were marked
// removed then), and the removed ones nothing holds any longer go, as
// removeUnseen would delete them.
func (cw *catalogueWriter) keepStored(ctx context.Context) error {
	if err := cw.w.QueryRow(ctx, `SELECT (SELECT count(*) FROM catalog.service_classes WHERE broker_id = $1 AND NOT removed),
		(SELECT count(*) FROM catalog.service_plans WHERE broker_id = $1 AND NOT removed)`, cw.b.ID).Scan(&cw.nClasses, &cw.nPlans); err != nil {
		return mapErr(err)
	}
	if err := dropWhere[ServicePlan](ctx, cw.w, "catalog.service_plans", markedRemoved+unheldPlan, cw.b.ID); err != nil {
		return err
	}
	return dropWhere[ServiceClass](ctx, cw.w, "catalog.service_classes", markedRemoved+unheldClass, cw.b.ID)
}

// chunk writes services [from, to) of cat.
func (cw *catalogueWriter) chunk(ctx context.Context, cat *osb.Catalogue, from, to int) error {
	services := make([]osb.Service, 0, to-from)
	var classIDs, planIDs []string
	for i := from; i < to; i++ {
		svc, err := cat.Service(i)
		if err != nil {
			return invalid(field.ErrorList{bad(field.NewPath("catalog"), err.Error())})
		}
		services = append(services, svc)
		classIDs = append(classIDs, svc.ID)
		for _, p := range svc.Plans {
			planIDs = append(planIDs, p.ID)
		}
	}
	oldClasses, err := storedByExternalID[ServiceClass](ctx, cw.w, cw.b.ID, classIDs)
	if err != nil {
		return err
	}
	oldPlans, err := storedByExternalID[ServicePlan](ctx, cw.w, cw.b.ID, planIDs)
	if err != nil {
		return err
	}
	batch := &pgx.Batch{}
	var changes []change
	for _, svc := range services {
		classPos, planPos := cw.pos.next(len(svc.Plans))
		class, ok := cw.class(batch, &changes, classPos, svc, oldClasses[svc.ID])
		if !ok {
			continue
		}
		for j, p := range svc.Plans {
			cw.plan(batch, &changes, planPos+j, class, p, oldPlans[p.ID])
		}
	}
	if err := cw.send(ctx, batch); err != nil {
		return err
	}
	return cw.w.stage(ctx, changes)
}

// class queues the row of a service's class, when the catalog
// restrictions keep it, and returns the class.
func (cw *catalogueWriter) class(batch *pgx.Batch, changes *[]change, pos int, svc osb.Service, old *ServiceClass) (*ServiceClass, bool) {
	b := cw.b
	class := classOf(b, svc)
	if !matchAll(cw.restrict.classes, labels.Set{"name": class.Name, "spec.externalName": svc.Name, "spec.externalID": svc.ID}) {
		return nil, false
	}
	cw.seenClass[svc.ID] = true
	cw.nClasses++
	switch {
	case old == nil:
		class.ID, class.CreationTimestamp, class.Generation = uuid.NewString(), cw.now, 1
		batch.Queue(`INSERT INTO catalog.service_classes (id, broker_id, name, external_id, external_name, position, spec, status, osb, resource_version, created_at, namespace)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, $11)`,
			class.ID, b.ID, class.Name, svc.ID, svc.Name, pos, mustJSON(class.Spec), mustJSON(class.Status), []byte(svc.Raw), cw.now, b.Namespace)
		*changes = append(*changes, change{Added, class})
	case sameOffer(old.Spec, class.Spec) && !old.Status.RemovedFromBrokerCatalog && old.Name == class.Name:
		// Only the order or the broker's document may have changed, and
		// most fetches change neither: the row is left alone then, for a
		// row written again, even as it was, leaves a dead row behind.
		// Writing these two alone leaves the catalogue's version where it
		// was (migrations/catalog 0026, 0027): nothing a creation
		// resolves reads them.
		class.Meta = old.Meta
		batch.Queue(`UPDATE catalog.service_classes SET position = $2, osb = $3 WHERE id = $1 AND (position, osb) IS DISTINCT FROM ($2, $3)`,
			old.ID, pos, []byte(svc.Raw))
	default:
		class.Meta = old.Meta
		batch.Queue(`UPDATE catalog.service_classes SET position = $2, osb = $3, spec = $4, status = '{}', removed = false,
			external_name = $5 WHERE id = $1`, old.ID, pos, []byte(svc.Raw), mustJSON(class.Spec), svc.Name)
		*changes = append(*changes, change{Modified, class})
	}
	return class, true
}

// plan queues the row of a plan of class, when the catalog restrictions
// keep it.
func (cw *catalogueWriter) plan(batch *pgx.Batch, changes *[]change, pos int, class *ServiceClass, p osb.Plan, old *ServicePlan) {
	b := cw.b
	plan := planOf(b, class, p)
	free := plan.Spec.Free
	fields := labels.Set{"name": plan.Name, "spec.externalName": p.Name, "spec.externalID": p.ID,
		"spec.free": strconv.FormatBool(free), "spec.clusterServiceClass.name": class.Name, "spec.serviceClass.name": class.Name}
	if !matchAll(cw.restrict.plans, fields) {
		return
	}
	cw.seenPlan[p.ID] = true
	cw.nPlans++
	switch {
	case old == nil:
		plan.ID, plan.CreationTimestamp, plan.Generation = uuid.NewString(), cw.now, 1
		batch.Queue(`INSERT INTO catalog.service_plans (id, broker_id, class_id, name, external_id, external_name, position, free, spec, status, osb, resource_version, created_at, namespace)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0, $12, $13)`,
			plan.ID, b.ID, class.ID, plan.Name, p.ID, p.Name, pos, free, mustJSON(plan.Spec), mustJSON(plan.Status), []byte(p.Raw), cw.now, b.Namespace)
		*changes = append(*changes, change{Added, plan})
	case sameOffer(old.Spec, plan.Spec) && !old.Status.RemovedFromBrokerCatalog:
		// Left alone when unchanged, as a class is.
		plan.Meta = old.Meta
		batch.Queue(`UPDATE catalog.service_plans SET position = $2, osb = $3 WHERE id = $1 AND (position, osb) IS DISTINCT FROM ($2, $3)`,
			old.ID, pos, []byte(p.Raw))
	default:
		plan.Meta = old.Meta
		batch.Queue(`UPDATE catalog.service_plans SET position = $2, osb = $3, spec = $4, status = '{}', removed = false,
			external_name = $5, free = $6, class_id = $7 WHERE id = $1`, old.ID, pos, []byte(p.Raw), mustJSON(plan.Spec), p.Name, free, class.ID)
		*changes = append(*changes, change{Modified, plan})
	}
}

// send sends a chunk's statements.
func (cw *catalogueWriter) send(ctx context.Context, batch *pgx.Batch) error {
	if batch.Len() == 0 {
		return nil
	}
	if err := cw.w.SendBatch(ctx, batch).Close(); err != nil {
		if errors.Is(mapErr(err), ErrConflict) {
			return errDuplicateOffer
		}
		return mapErr(err)
	}
	return nil
}

// removeUnseen deletes the classes and plans the catalogue no longer
// offers (or its restrictions filter out) that nothing holds, and marks
// the others removed, a chunk at a time.
func (cw *catalogueWriter) removeUnseen(ctx context.Context) error {
	if err := dropWhere[ServicePlan](ctx, cw.w, "catalog.service_plans", notOffered+unheldPlan, cw.b.ID, seenIDs(cw.seenPlan)); err != nil {
		return err
	}
	if err := dropWhere[ServiceClass](ctx, cw.w, "catalog.service_classes", notOffered+unheldClass, cw.b.ID, seenIDs(cw.seenClass)); err != nil {
		return err
	}
	if err := markRemoved[ServiceClass](ctx, cw.w, cw.b.ID, "catalog.service_classes", cw.seenClass, func(c *ServiceClass) *bool {
		return &c.Status.RemovedFromBrokerCatalog
	}, func(c *ServiceClass) any { return c.Status }); err != nil {
		return err
	}
	return markRemoved[ServicePlan](ctx, cw.w, cw.b.ID, "catalog.service_plans", cw.seenPlan, func(p *ServicePlan) *bool {
		return &p.Status.RemovedFromBrokerCatalog
	}, func(p *ServicePlan) any { return p.Status })
}

// The classes and plans of broker $1 not offered (removed, or not among
// the external ids $2 of this fetch; or, when the catalogue is the one
// stored last, marked removed) that nothing holds, which removeUnseen and
// keepStored delete rather than mark, as Service Catalog deleted a removed
// plan without instances: a broker that offers its plans under new ids at
// every fetch would otherwise grow the tables without end. Nothing holds a
// plan when no instance names it and no one set who sees it or how many of
// its instances a namespace may have (those would be lost with the row,
// and a plan offered again would come back unrestricted); a class, when no
// instance names it and it has no plan left.
const (
	notOffered    = `broker_id = $1 AND (removed OR NOT (external_id = ANY($2)))`
	markedRemoved = `broker_id = $1 AND removed`
	unheldPlan    = `
		AND NOT EXISTS (SELECT 1 FROM catalog.instances i WHERE i.plan_id = service_plans.id)
		AND NOT EXISTS (SELECT 1 FROM catalog.quota_plans q WHERE q.plan_id = service_plans.id)
		AND metadata -> 'annotations' -> '` + VisibleInAnnotation + `' IS NULL`
	unheldClass = `
		AND NOT EXISTS (SELECT 1 FROM catalog.instances i WHERE i.class_id = service_classes.id)
		AND NOT EXISTS (SELECT 1 FROM catalog.service_plans p WHERE p.class_id = service_classes.id)`
)

// dropWhere deletes the rows of table that cond (on args) picks, 500 to a
// statement, and stages their deletions. They are at most the rows of the
// catalogues fetched since the last relist.
//
// The rows are locked before they are deleted, and cond is asked again by
// the DELETE, a statement of its own: a creation naming a row, or a
// visibility set on it, that committed while the lock waited is then seen
// (a statement sees what committed before it began), and the row is kept;
// locked, a row takes no new holder until the relist commits. The rows
// kept are marked removed, as rows that were held.
func dropWhere[T any, P interface {
	*T
	object
}](ctx context.Context, w *txn, table, cond string, args ...any) error {
	l, err := list[T, P](ctx, w, &filter{conds: []string{cond}, args: args}, "position", nil, nil, ListOptions{})
	if err != nil {
		return err
	}
	del := `DELETE FROM ` + table + ` WHERE id = ANY($` + strconv.Itoa(len(args)+1) + `::uuid[]) AND (` + cond + `) RETURNING id::text`
	for items := l.Items; len(items) > 0; {
		n := min(500, len(items))
		batch := items[:n]
		ids := make([]string, n)
		for i, o := range batch {
			ids[i] = o.meta().ID
		}
		items = items[n:]
		if _, err := w.Exec(ctx, `SELECT FROM `+table+` WHERE id = ANY($1::uuid[]) FOR UPDATE`, ids); err != nil {
			return mapErr(err)
		}
		rows, err := w.Query(ctx, del, append(slices.Clip(args), ids)...)
		if err != nil {
			return mapErr(err)
		}
		deleted, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return mapErr(err)
		}
		gone := make(map[string]bool, len(deleted))
		for _, id := range deleted {
			gone[id] = true
		}
		changes := make([]change, 0, len(deleted))
		for _, o := range batch {
			if gone[o.meta().ID] {
				changes = append(changes, change{Deleted, o})
			}
		}
		if err := w.stage(ctx, changes); err != nil {
			return err
		}
	}
	return nil
}

// seenIDs are the external ids of seen, never nil: ANY of a NULL array
// would match no row, not every row.
func seenIDs(seen map[string]bool) []string {
	return slices.AppendSeq(make([]string, 0, len(seen)), maps.Keys(seen))
}

// markRemoved marks the rows of table of broker whose external ids are not
// in seen removed, and stages their changes.
func markRemoved[T any, P interface {
	*T
	object
}](ctx context.Context, w *txn, broker, table string, seen map[string]bool, removed func(P) *bool, status func(P) any) error {
	rows, err := w.Query(ctx, `SELECT id::text FROM `+table+` WHERE broker_id = $1 AND NOT removed AND NOT (external_id = ANY($2))`, broker, seenIDs(seen))
	if err != nil {
		return mapErr(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return mapErr(err)
	}
	const chunk = 500
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		f := &filter{}
		f.add("id = ANY(?::uuid[])", ids[:n])
		ids = ids[n:]
		l, err := list[T, P](ctx, w, f, "position", nil, nil, ListOptions{})
		if err != nil {
			return err
		}
		batch := &pgx.Batch{}
		changes := make([]change, 0, len(l.Items))
		for _, o := range l.Items {
			*removed(o) = true
			batch.Queue(`UPDATE `+table+` SET removed = true, status = $2 WHERE id = $1`, o.meta().ID, mustJSON(status(o)))
			changes = append(changes, change{Modified, o})
		}
		if err := w.SendBatch(ctx, batch).Close(); err != nil {
			return mapErr(err)
		}
		if err := w.stage(ctx, changes); err != nil {
			return err
		}
	}
	return nil
}

// storedByExternalID reads the classes or plans of a broker with these
// external ids, by external id.
func storedByExternalID[T any, P interface {
	*T
	object
	externalID() string
}](ctx context.Context, w *txn, broker string, ids []string) (map[string]P, error) {
	f := &filter{}
	f.add("broker_id = ?", broker)
	f.add("external_id = ANY(?)", ids)
	l, err := list[T, P](ctx, w, f, "position", nil, nil, ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]P, len(l.Items))
	for _, o := range l.Items {
		out[o.externalID()] = o
	}
	return out, nil
}

func (c *ServiceClass) externalID() string { return c.Spec.ExternalID }
func (p *ServicePlan) externalID() string  { return p.Spec.ExternalID }

// classOf is the service class a broker's catalogue entry describes, in
// the broker's namespace.
func classOf(b *Broker, svc osb.Service) *ServiceClass {
	class := &ServiceClass{Spec: ServiceClassSpec{
		ExternalName:         svc.Name,
		ExternalID:           svc.ID,
		Description:          pgtext.Clip(svc.Description, osb.MaxDescription),
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
		Description:            pgtext.Clip(p.Description, osb.MaxDescription),
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
		plan.Spec.MaintenanceInfo = &MaintenanceInfo{Version: p.MaintenanceInfo.Version, Description: pgtext.Clip(p.MaintenanceInfo.Description, osb.MaxDescription)}
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

// sameOffer says whether the spec of a class or plan as stored is the one
// a fetch made of it. Its JSON documents (metadata, schemas) come back
// from jsonb with their keys in jsonb's order, not the encoder's, so
// equal specs may differ in bytes: they are compared in RFC 8785's
// canonical form then (keys sorted, numbers as float64 writes them, as a
// decoding into any would compare them), cheaper than decoding both.
func sameOffer(stored, fetched any) bool {
	a, b := jsontext.Value(mustJSON(stored)), jsontext.Value(mustJSON(fetched))
	if bytes.Equal(a, b) {
		return true
	}
	return a.Canonicalize() == nil && b.Canonicalize() == nil && bytes.Equal(a, b)
}

// RunRelister relists every broker whose relist is due, until ctx ends.
// Each relist is claimed in the database first, so with several replicas
// one of them relists a given broker at a time. The namespaces whose
// brokers are due (the cluster's brokers being one more) take turns: a
// namespace with many brokers due, or slow ones, delays another's by one
// relist, not by all of its own.
func (s *Store) RunRelister(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	// served is the namespaces relisted in this turn.
	served := map[string]bool{}
	for {
		for {
			id, ns, err := s.claimRelist(ctx, slices.Collect(maps.Keys(served)))
			if err != nil {
				if ctx.Err() == nil {
					s.log.WarnContext(ctx, "claim a relist", "error", err)
				}
				break
			}
			if id == "" {
				break
			}
			if served[ns] {
				// Every namespace with a broker due had its turn.
				clear(served)
			}
			served[ns] = true
			_, _ = s.Relist(ctx, id) // failures are in the broker's status and the log
		}
		clear(served)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// claimRelist takes one due broker for this process for two minutes, one
// of a namespace not in served if any is due (the one due longest
// otherwise), and returns its id and namespace; brokers whose credentials
// are in Secrets only when the store reads them.
func (s *Store) claimRelist(ctx context.Context, served []string) (id, namespace string, err error) {
	if served == nil {
		served = []string{}
	}
	err = s.pool.QueryRow(ctx, `UPDATE catalog.brokers SET relist_claimed_until = now() + interval '2 minutes'
		WHERE id = (SELECT id FROM catalog.brokers
			WHERE deletion_timestamp IS NULL AND next_relist_at <= now()
			  AND (relist_claimed_until IS NULL OR relist_claimed_until < now())
			  AND ($1 OR (spec #> '{authInfo,basic,secretRef}' IS NULL AND spec #> '{authInfo,bearer,secretRef}' IS NULL))
			ORDER BY namespace = ANY($2::text[]), next_relist_at LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED)
		RETURNING id, namespace`, s.secrets != nil, served).Scan(&id, &namespace)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	return id, namespace, mapErr(err)
}
