package catalog

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultRelistDuration is how often a broker's catalogue is fetched again
// when its spec does not say.
const DefaultRelistDuration = 15 * time.Minute

// classFields and planFields are the fields catalog restrictions may use.
var (
	classFields = map[string]bool{"name": true, "spec.externalName": true, "spec.externalID": true}
	planFields  = map[string]bool{"name": true, "spec.externalName": true, "spec.externalID": true, "spec.free": true, "spec.clusterServiceClass.name": true, "spec.serviceClass.name": true}
)

// KeepAuth, returned by an UpdateBroker update function, keeps the stored
// credentials although the URL changes: the caller vouches that the new
// address may have them. Without it a new URL needs new credentials.
var KeepAuth = &BrokerAuth{}

// admitBroker defaults a broker's spec, checks it and its credentials
// (returning every problem), and records in the spec how it
// authenticates.
func admitBroker(b *Broker, auth *BrokerAuth) error {
	defaultBroker(b)
	if err := invalid(validateBroker(b, auth)); err != nil {
		return err
	}
	setAuthInfo(&b.Spec, auth)
	return nil
}

// defaultBroker fills in what a broker's spec may leave out: relisting
// every DefaultRelistDuration, and, for a namespaced broker, the namespace
// of its credentials' Secret, which is always its own.
func defaultBroker(b *Broker) {
	s := &b.Spec
	if ref := s.AuthInfo.secretRef(); ref != nil && b.Namespace != "" && ref.Namespace == "" {
		ref.Namespace = b.Namespace
	}
	if s.RelistBehavior == "" {
		s.RelistBehavior = RelistDuration
	}
	if s.RelistBehavior == RelistDuration && s.RelistDuration == "" {
		s.RelistDuration = DefaultRelistDuration.String()
	}
}

// validateBroker checks a defaulted broker's spec and its credentials.
func validateBroker(b *Broker, auth *BrokerAuth) field.ErrorList {
	errs := validateName(field.NewPath("name"), b.Name)
	if b.Namespace != "" {
		errs = append(errs, validateNamespace(field.NewPath("namespace"), b.Namespace)...)
	}
	errs = append(errs, validateMeta(&b.Meta)...)
	errs = append(errs, validateStorable(&b.Spec)...)
	s := &b.Spec
	spec := field.NewPath("spec")
	errs = append(errs, validateBrokerURL(spec.Child("url"), s.URL)...)
	errs = append(errs, validateCounter(spec.Child("relistRequests"), s.RelistRequests, 0)...)
	switch s.RelistBehavior {
	case RelistDuration:
		if d, err := time.ParseDuration(s.RelistDuration); err != nil || d < time.Second {
			errs = append(errs, bad(spec.Child("relistDuration"), "must be a duration of at least 1s, like 15m0s"))
		}
	case RelistManual:
		if s.RelistDuration != "" {
			errs = append(errs, bad(spec.Child("relistDuration"), "must be empty when relistBehavior is Manual"))
		}
	default:
		errs = append(errs, bad(spec.Child("relistBehavior"), "must be Duration or Manual"))
	}
	if s.CABundle != "" {
		if s.InsecureSkipTLSVerify {
			errs = append(errs, bad(spec.Child("caBundle"), "must be empty when insecureSkipTLSVerify is true"))
		} else if !validPEM(s.CABundle) {
			errs = append(errs, bad(spec.Child("caBundle"), "must hold PEM-encoded certificates"))
		}
	}
	if r := s.CatalogRestrictions; r != nil {
		restrictions := spec.Child("catalogRestrictions")
		for i, req := range r.ServiceClass {
			if err := checkRestriction(req, classFields); err != "" {
				errs = append(errs, bad(restrictions.Child("serviceClass").Index(i), err))
			}
		}
		for i, req := range r.ServicePlan {
			if err := checkRestriction(req, planFields); err != "" {
				errs = append(errs, bad(restrictions.Child("servicePlan").Index(i), err))
			}
		}
	}
	if ref := s.AuthInfo.secretRef(); ref != nil && auth == nil {
		return append(errs, validateAuthSecretRef(b, ref)...)
	}
	return append(errs, validateBrokerAuth(auth)...)
}

// maxBrokerURL bounds a broker's URL: it is stored, shown and sent in
// every request to the broker.
const maxBrokerURL = 2048

// validateBrokerURL checks a broker's URL: absolute, http or https, at
// most maxBrokerURL bytes, and without credentials.
func validateBrokerURL(path *field.Path, raw string) field.ErrorList {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return field.ErrorList{field.Required(path, "")}
	case len(raw) > maxBrokerURL:
		return field.ErrorList{bad(path, fmt.Sprintf("must be at most %d characters", maxBrokerURL))}
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return field.ErrorList{bad(path, "must be an absolute http or https URL")}
	case u.User != nil:
		// Never stored, shown or quoted: credentials go in the auth
		// fields, which are sealed.
		return field.ErrorList{bad(path, "must not hold credentials (user:password@host): give them as basic or bearer auth, which are sealed")}
	case len(u.Hostname()) > 253:
		return field.ErrorList{bad(path, "has a host name longer than 253 characters, which no DNS name is")}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return field.ErrorList{bad(path, "has a port outside 1–65535")}
		}
	}
	return nil
}

// validateAuthSecretRef checks credentials kept in a Kubernetes Secret
// (the Kubernetes API's authInfo), which ref names.
func validateAuthSecretRef(b *Broker, ref *ObjectRef) field.ErrorList {
	var errs field.ErrorList
	s := &b.Spec
	spec := field.NewPath("spec")
	path := spec.Child("authInfo", "bearer", "secretRef")
	if s.AuthInfo.Basic != nil && s.AuthInfo.Basic.SecretRef == ref {
		path = spec.Child("authInfo", "basic", "secretRef")
	}
	if s.AuthInfo.Basic != nil && s.AuthInfo.Bearer != nil {
		errs = append(errs, bad(spec.Child("authInfo"), "give basic or bearer, not both"))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	switch {
	case ref.Namespace == "":
		errs = append(errs, field.Required(path.Child("namespace"), "a cluster-scoped broker names the Secret's namespace"))
	case b.Namespace != "" && ref.Namespace != b.Namespace:
		errs = append(errs, bad(path.Child("namespace"), "a namespaced broker's Secret is in the broker's namespace"))
	}
	return errs
}

// MaxBrokerAuthorization bounds the Authorization header a broker's
// credentials make ("Basic " and the base64 of user:password, or "Bearer "
// and the token), in bytes: it is sent with every request to the broker,
// and HTTP servers refuse a header longer than about 8 KiB (nginx, Apache,
// Tomcat), so a longer one was stored and every call to the broker then
// failed.
const MaxBrokerAuthorization = 8 << 10

// validateBrokerAuth checks credentials given with the broker (sealed
// apart); nil is none.
func validateBrokerAuth(auth *BrokerAuth) field.ErrorList {
	if auth == nil {
		return nil
	}
	var errs field.ErrorList
	creds := field.NewPath("auth")
	required := func(p *field.Path, v string) bool {
		if v == "" {
			errs = append(errs, field.Required(p, ""))
		}
		return v != ""
	}
	tooLong := func(p *field.Path) {
		errs = append(errs, bad(p, fmt.Sprintf("is too long: the Authorization header it makes must be at most %d bytes, as HTTP servers take", MaxBrokerAuthorization)))
	}
	switch {
	case auth.Basic != nil && auth.Bearer != nil:
		errs = append(errs, bad(creds, "give basic or bearer, not both"))
	case auth.Basic != nil:
		user, pass := creds.Child("basic", "username"), creds.Child("basic", "password")
		hasUser, hasPass := required(user, auth.Basic.Username), required(pass, auth.Basic.Password)
		if hasUser && hasPass {
			header := func(n int) int { return len("Basic ") + base64.StdEncoding.EncodedLen(n) }
			switch {
			case header(len(auth.Basic.Username)+1) > MaxBrokerAuthorization:
				tooLong(user)
			case header(len(auth.Basic.Username)+1+len(auth.Basic.Password)) > MaxBrokerAuthorization:
				tooLong(pass)
			}
		}
	case auth.Bearer != nil:
		token := creds.Child("bearer", "token")
		if required(token, auth.Bearer.Token) && len("Bearer ")+len(auth.Bearer.Token) > MaxBrokerAuthorization {
			tooLong(token)
		}
	}
	return errs
}

// setAuthInfo records in a valid spec how the broker authenticates: the
// Secret it names (nothing to seal, the reference is kept), or the kind of
// the credentials given (sealed apart), or nothing.
func setAuthInfo(s *BrokerSpec, auth *BrokerAuth) {
	if ref := s.AuthInfo.secretRef(); ref != nil && auth == nil {
		if s.AuthInfo.Basic != nil && s.AuthInfo.Basic.SecretRef == ref {
			s.AuthInfo = &BrokerAuthInfo{Basic: &BasicAuthInfo{SecretRef: ref}}
		} else {
			s.AuthInfo = &BrokerAuthInfo{Bearer: &BearerAuthInfo{SecretRef: ref}}
		}
		return
	}
	s.AuthInfo = nil
	switch {
	case auth == nil:
	case auth.Basic != nil:
		s.AuthInfo = &BrokerAuthInfo{Basic: &BasicAuthInfo{Username: auth.Basic.Username}}
	case auth.Bearer != nil:
		s.AuthInfo = &BrokerAuthInfo{Bearer: &BearerAuthInfo{}}
	}
}

// secretRef is the Secret holding the credentials, if they are in one.
func (a *BrokerAuthInfo) secretRef() *ObjectRef {
	switch {
	case a == nil:
		return nil
	case a.Basic != nil && a.Basic.SecretRef != nil:
		return a.Basic.SecretRef
	case a.Bearer != nil && a.Bearer.SecretRef != nil:
		return a.Bearer.SecretRef
	}
	return nil
}

// SecretRef is the Kubernetes Secret holding the broker's credentials, or
// nil when they are sealed in the catalog (or there are none).
func (s *BrokerSpec) SecretRef() *ObjectRef { return s.AuthInfo.secretRef() }

func validPEM(s string) bool {
	rest := []byte(s)
	found := false
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return found
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return false
		}
		found = true
	}
}

// checkRestriction parses one restriction and checks its fields.
func checkRestriction(req string, fields map[string]bool) string {
	sel, err := labels.Parse(req)
	if err != nil {
		return err.Error()
	}
	rs, _ := sel.Requirements()
	for _, r := range rs {
		if !fields[r.Key()] {
			return fmt.Sprintf("field %q cannot be used in a restriction", r.Key())
		}
	}
	return ""
}

func (s *Store) sealAuth(id string, auth *BrokerAuth) ([]byte, error) {
	if auth == nil || (auth.Basic == nil && auth.Bearer == nil) {
		return nil, nil
	}
	raw, err := json.Marshal(auth)
	if err != nil {
		return nil, err
	}
	keys, err := s.keyring()
	if err != nil {
		return nil, err
	}
	return keys.Seal(raw, []byte("broker:"+id)), nil
}

// BrokerAuth returns the credentials Bindery presents to a broker.
func (s *Store) BrokerAuth(ctx context.Context, id string) (*BrokerAuth, error) {
	var sealed []byte
	if err := s.pool.QueryRow(ctx, `SELECT auth FROM catalog.brokers WHERE id = $1`, id).Scan(&sealed); err != nil {
		return nil, mapErr(err)
	}
	if sealed == nil {
		return nil, nil
	}
	keys, err := s.keyring()
	if err != nil {
		return nil, err
	}
	raw, err := keys.Open(sealed, []byte("broker:"+id))
	if err != nil {
		return nil, fmt.Errorf("open credentials of broker %s: %w", id, err)
	}
	var auth BrokerAuth
	if err := json.Unmarshal(raw, &auth); err != nil {
		return nil, err
	}
	return &auth, nil
}

// CreateBroker registers a broker. Its catalogue is fetched by Relist,
// which the caller runs next (the REST API does so before answering), and
// by the relister when due.
func (s *Store) CreateBroker(ctx context.Context, b *Broker, auth *BrokerAuth) (*Broker, error) {
	if err := admitBroker(b, auth); err != nil {
		return nil, err
	}
	if b.ID == "" {
		b.ID = uuid.NewString()
	}
	now := s.now().UTC()
	b.Generation, b.CreationTimestamp = 1, now
	b.Status = BrokerStatus{}
	sealed, err := s.sealAuth(b.ID, auth)
	if err != nil {
		return nil, err
	}
	_, err = s.write(ctx, func(w *txn) error {
		if err := s.roomForBroker(ctx, w, b.Namespace); err != nil {
			return err
		}
		md, err := encodeMeta(&b.Meta)
		if err != nil {
			return err
		}
		_, err = w.Exec(ctx, `INSERT INTO catalog.brokers (id, namespace, name, metadata, spec, status, auth, generation, resource_version, created_at, next_relist_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 1, 0, $8, $8)`, b.ID, b.Namespace, b.Name, md, mustJSON(b.Spec), mustJSON(b.Status), sealed, now)
		if err != nil {
			if errors.Is(mapErr(err), ErrConflict) {
				return brokerExists(b)
			}
			return mapErr(err)
		}
		w.changed(Added, b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// DefaultMaxBrokersPerNamespace is how many brokers of its own a
// namespace may have unless WithMaxBrokersPerNamespace says otherwise.
// Every broker is fetched and relisted (as often as every second), keeps
// a catalogue of up to 32 MiB and has its own bulkhead in each engine: a
// team registers a few, and one that registered without end would take
// the relister's turns, the database's room and the engine's memory from
// every other. The cluster's brokers, which only its administrators
// register, are not bounded.
const DefaultMaxBrokersPerNamespace = 16

// MaxBrokersFlag names the flag that sets the bound, as refusals say.
const MaxBrokersFlag = "max-brokers-per-namespace"

// WithMaxBrokersPerNamespace bounds the brokers of each namespace; 0: no
// bound.
func WithMaxBrokersPerNamespace(n int) Option {
	return func(s *Store) { s.maxBrokers = max(n, 0) }
}

// brokersLockSpace is the first key of the advisory lock a namespace's
// broker creations take, beside the quotas' of instances and bindings
// (instancesLockSpace, bindingsLockSpace).
const brokersLockSpace = 1903521603

// roomForBroker refuses a new broker of namespace that has as many as it
// may (a *QuotaError): the server's bound or a ResourceQuota's on
// count/servicebrokers.servicecatalog.k8s.io, the strictest. Creations of
// one namespace's brokers wait for one another here until commit, so that
// two cannot both take the last room; they are rare.
func (s *Store) roomForBroker(ctx context.Context, w *txn, namespace string) error {
	if namespace == "" {
		return nil
	}
	// The count in a statement after the lock's: each reads what was
	// committed when it began.
	if _, err := w.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, brokersLockSpace, namespace); err != nil {
		return mapErr(err)
	}
	rqs, err := resourceQuotas(ctx, w, namespace)
	if err != nil {
		return err
	}
	limit, source := brokerLimit(s.maxBrokers, rqs)
	if limit == nil {
		return nil
	}
	var used int64
	if err := w.QueryRow(ctx, `SELECT count(*) FROM catalog.brokers WHERE namespace = $1`, namespace).Scan(&used); err != nil {
		return mapErr(err)
	}
	if used >= *limit {
		return &QuotaError{Namespace: namespace, Resource: QuotaBrokers, Limit: *limit, Used: used, Source: source}
	}
	return nil
}

// brokerLimit is the strictest bound on a namespace's brokers, nil for
// none, and where it comes from: the server's (0: none) or one of the
// namespace's ResourceQuotas (by name: the first of the strictest wins).
func brokerLimit(server int, rqs []ResourceQuota) (*int64, string) {
	var lim *int64
	var source string
	if server > 0 {
		n := int64(server)
		lim, source = &n, SourceServer
	}
	return strictest(lim, source, rqs, QuotaBrokers)
}

// brokerExists is the conflict of a new broker whose name is taken.
func brokerExists(b *Broker) error {
	if b.Namespace != "" {
		return nameTaken("broker", b.Name, b.Namespace)
	}
	return nameTaken("broker", b.Name, "")
}

// GetBroker reads a cluster-scoped broker by id or by name.
func (s *Store) GetBroker(ctx context.Context, idOrName string) (*Broker, error) {
	return s.GetBrokerIn(ctx, "", idOrName)
}

// GetBrokerIn reads a broker of a namespace ("" for the cluster's) by id
// or by name.
func (s *Store) GetBrokerIn(ctx context.Context, namespace, idOrName string) (*Broker, error) {
	return getByIDOrName[Broker](ctx, s.pool, namespace, idOrName)
}

// ListBrokers lists brokers by name: the cluster's, or the namespaced
// ones (by namespace and name) when opts.Namespaced.
func (s *Store) ListBrokers(ctx context.Context, opts ListOptions) (List[*Broker], error) {
	f := &filter{}
	f.scope(scopedKind(KindBroker, KindNamespacedBroker, opts), opts)
	return list[Broker](ctx, s.pool, f, "namespace, name",
		func(f *filter, c cursor) { f.add("(namespace, name) > (?, ?)", c.Namespace, c.Name) },
		func(b *Broker) cursor { return cursor{Namespace: b.Namespace, Name: b.Name} }, opts)
}

// ListBrokersWithNamespaced lists the cluster's brokers and the namespaced
// ones together, a page at a time, by namespace and name: the cluster's
// (of namespace "") first. opts.Namespaces, when given, limits the
// namespaced ones to those namespaces (a token's or a session's);
// opts.Namespace and opts.Namespaced are not read.
func (s *Store) ListBrokersWithNamespaced(ctx context.Context, opts ListOptions) (List[*Broker], error) {
	f := &filter{}
	opts.Namespace = ""
	if len(opts.Namespaces) > 0 {
		opts.Namespaces = append([]string{""}, opts.Namespaces...)
		f.add("namespace = ANY(?)", opts.Namespaces)
	}
	return list[Broker](ctx, s.pool, f, "namespace, name",
		func(f *filter, c cursor) { f.add("(namespace, name) > (?, ?)", c.Namespace, c.Name) },
		func(b *Broker) cursor { return cursor{Namespace: b.Namespace, Name: b.Name} }, opts)
}

// UpdateBroker changes a broker's labels, spec and (when auth is not nil)
// credentials. A changed spec is a new generation and is relisted at once.
// expectRV, when not 0, must be the broker's resourceVersion.
func (s *Store) UpdateBroker(ctx context.Context, id string, expectRV int64, update func(*Broker) (*BrokerAuth, error)) (*Broker, error) {
	var out *Broker
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Broker](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		if expectRV != 0 && b.ResourceVersion != expectRV {
			return stale("broker", b.Namespace, b.Name)
		}
		before := b.Spec
		metaBefore, err := encodeMeta(&b.Meta)
		if err != nil {
			return err
		}
		name, ns := b.Name, b.Namespace
		auth, err := update(b)
		if err != nil {
			return err
		}
		// A broker's name and scope are what it is; they do not change.
		b.Name, b.Namespace = name, ns
		explicitKeep := auth == KeepAuth
		if explicitKeep {
			auth = nil
		}
		if auth == nil && !explicitKeep && b.Spec.URL != before.URL && before.AuthInfo != nil && before.SecretRef() == nil {
			return invalid(field.ErrorList{bad(field.NewPath("spec", "url"), "a new URL needs the broker's credentials again (auth), or keepAuth to send the stored ones to the new address")})
		}
		// No new credentials: the sealed ones stay, unless the spec names
		// a Secret, or named one (then the spec alone says what is used).
		keepAuth := auth == nil && b.Spec.SecretRef() == nil && before.SecretRef() == nil
		if err := admitBroker(b, auth); err != nil {
			return err
		}
		if err := invalid(validateCounter(field.NewPath("spec", "relistRequests"), b.Spec.RelistRequests, before.RelistRequests)); err != nil {
			return err
		}
		if keepAuth {
			b.Spec.AuthInfo = before.AuthInfo
		}
		relist := !reflect.DeepEqual(before, b.Spec) || auth != nil
		if relist {
			b.Generation++
		}
		md, err := encodeMeta(&b.Meta)
		if err != nil {
			return err
		}
		if keepAuth && !relist && bytes.Equal(md, metaBefore) {
			// Nothing changed: no write, no revision, no MODIFIED event.
			out = b
			return nil
		}
		if keepAuth {
			_, err = w.Exec(ctx, `UPDATE catalog.brokers SET metadata = $2, spec = $3, generation = $4,
				next_relist_at = CASE WHEN $5 THEN now() ELSE next_relist_at END WHERE id = $1`,
				id, md, mustJSON(b.Spec), b.Generation, relist)
		} else {
			sealed, serr := s.sealAuth(id, auth)
			if serr != nil {
				return serr
			}
			_, err = w.Exec(ctx, `UPDATE catalog.brokers SET metadata = $2, spec = $3, generation = $4, auth = $5,
				next_relist_at = now() WHERE id = $1`, id, md, mustJSON(b.Spec), b.Generation, sealed)
		}
		if err != nil {
			return mapErr(err)
		}
		w.changed(Modified, b)
		out = b
		return nil
	})
	return out, err
}

// DeleteBroker deregisters a broker with its classes and plans. A broker
// whose plans still have instances is kept: delete those first.
func (s *Store) DeleteBroker(ctx context.Context, id string) error {
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Broker](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		if err := unchanged(ctx, "broker", &b.Meta); err != nil {
			return err
		}
		var n int
		if err := w.QueryRow(ctx, `SELECT count(*) FROM catalog.instances i JOIN catalog.service_plans p ON p.id = i.plan_id
			WHERE p.broker_id = $1`, id).Scan(&n); err != nil {
			return mapErr(err)
		}
		if n > 0 {
			return conflictf("Broker %s still has %d instances: deprovision them first, then deregister it.", b.Name, n)
		}
		classes, err := list[ServiceClass](ctx, w, &filter{conds: []string{"broker_id = $1"}, args: []any{id}}, "position", nil, nil, ListOptions{})
		if err != nil {
			return err
		}
		plans, err := list[ServicePlan](ctx, w, &filter{conds: []string{"broker_id = $1"}, args: []any{id}}, "position", nil, nil, ListOptions{})
		if err != nil {
			return err
		}
		if _, err := w.Exec(ctx, `DELETE FROM catalog.brokers WHERE id = $1`, id); err != nil {
			return mapErr(err)
		}
		for _, p := range plans.Items {
			w.changed(Deleted, p)
		}
		for _, c := range classes.Items {
			w.changed(Deleted, c)
		}
		w.changed(Deleted, b)
		return nil
	})
	return err
}

func mustJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("catalog: encode %T: %v", v, err))
	}
	return raw
}

// CheckBroker checks a new broker as CreateBroker does (without
// credentials: the Kubernetes API gives none), its name being free and
// its namespace's bound on brokers among it, without recording it, for a
// dry run. It answers the broker as CreateBroker would make it; b is left
// as it was.
func (s *Store) CheckBroker(ctx context.Context, b *Broker) (*Broker, error) {
	dry := *b
	if _, err := s.CreateBroker(WithDryRun(ctx), &dry, nil); err != nil {
		return nil, err
	}
	return &dry, nil
}
