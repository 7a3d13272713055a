package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osb"
)

// Errors of the store; the pgx errors they come from do not leave it.
var (
	// ErrNotFound: no such object.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a name is taken, or the object changed since it was read.
	ErrConflict = errors.New("conflict")
)

// Store is the catalog's domain layer over PostgreSQL.
type Store struct {
	pool    *pgxpool.Pool
	keys    *keyring.Keyring
	log     *slog.Logger
	now     func() time.Time
	secrets SecretReader
	publish func([]ObjectEvent)
	// brokerTimeout bounds each call to a broker; egress says where
	// brokers may be (internal/osb Egress).
	brokerTimeout time.Duration
	egress        *osb.Egress
	feed          *Feed
	// snapshotLimit bounds how long a read holds a snapshot open.
	snapshotLimit time.Duration
	// maxBrokers bounds each namespace's own brokers (brokers.go); 0: no
	// bound.
	maxBrokers int
	// notifier announces committed revisions (notify.go).
	notifier notifier
	// plans keeps the classes and plans new objects resolved to, and the
	// classes, plans and brokers the engine read (plancache.go).
	plans planCache
	// fetches coalesces and limits catalogue fetches (fetches.go).
	fetches fetches
	// iconFetcher fetches the services' icons (icons.go).
	iconFetcher
}

// SecretReader reads a Kubernetes Secret's data: the credentials of
// brokers registered through the Kubernetes API with authInfo.secretRef.
type SecretReader interface {
	SecretData(ctx context.Context, namespace, name string) (map[string][]byte, error)
}

// Option gives a Store a dependency at construction.
type Option func(*Store)

// PublishEventsTo has the store hand every history entry it records, once
// committed, to publish (the engine makes them Kubernetes Events). publish
// must not block.
func PublishEventsTo(publish func([]ObjectEvent)) Option {
	return func(s *Store) { s.publish = publish }
}

// ReadSecretsWith lets the store read brokers' credentials from Secrets
// (the engine does, with its cluster). Without it such brokers are left to
// stores that can: this store's relister does not claim them.
func ReadSecretsWith(r SecretReader) Option {
	return func(s *Store) { s.secrets = r }
}

// NewStore returns a Store. keys seal broker credentials and binding
// credentials; a store without them (the Kubernetes API server's, which
// reads and writes no secret) refuses to.
func NewStore(pool *pgxpool.Pool, keys *keyring.Keyring, log *slog.Logger, opts ...Option) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{pool: pool, keys: keys, log: log, now: time.Now, brokerTimeout: DefaultBrokerTimeout, snapshotLimit: DefaultSnapshotLimit,
		maxBrokers: DefaultMaxBrokersPerNamespace}
	s.fetches.slots = newTurns(DefaultCatalogueFetches)
	for _, o := range opts {
		o(s)
	}
	s.feed = &Feed{s: s}
	s.notifier.s = s
	return s
}

// DefaultBrokerTimeout bounds a call to a broker unless WithBrokerTimeout
// says otherwise: registration answers within it.
const DefaultBrokerTimeout = 10 * time.Second

// WithBrokerTimeout bounds fetching a broker's catalogue (registration
// answers within it). The engine's OSB calls keep OSB's 60 s.
func WithBrokerTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.brokerTimeout = d
		}
	}
}

// WithBrokerEgress gives the policy every connection to a broker is
// checked against, after DNS resolution. Without it only
// internal/osb.DefaultDeny applies.
func WithBrokerEgress(e *osb.Egress) Option {
	return func(s *Store) { s.egress = e }
}

// ErrNoKeys means a store without encryption keys was asked to seal or
// open credentials.
var ErrNoKeys = errors.New("this process has no encryption keys: it cannot seal or open credentials")

func (s *Store) keyring() (*keyring.Keyring, error) {
	if s.keys == nil {
		return nil, ErrNoKeys
	}
	return s.keys, nil
}

// Ping checks that the database answers, for health checks.
func (s *Store) Ping(ctx context.Context) error { return mapErr(s.pool.Ping(ctx)) }

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			if fc, ok := uniqueFields[pgErr.ConstraintName]; ok {
				e := *fc
				return &e
			}
			return &ConflictError{Message: "It conflicts with an object that already exists."}
		case "23503":
			return &ConflictError{Message: "Other objects still refer to it: delete them first."}
		}
	}
	return err
}

// object is what every catalog object is: its Meta, and its table.
type object interface {
	meta() *Meta
	kind() string
}

func (m *Meta) meta() *Meta { return m }

// scoped is the kind of a broker, class or plan: the cluster's, or the
// namespaced one when it has a namespace.
func scoped(m *Meta, cluster, namespaced string) string {
	if m.Namespace != "" {
		return namespaced
	}
	return cluster
}

func (b *Broker) kind() string { return scoped(&b.Meta, KindBroker, KindNamespacedBroker) }
func (c *ServiceClass) kind() string {
	return scoped(&c.Meta, KindServiceClass, KindNamespacedServiceClass)
}
func (p *ServicePlan) kind() string {
	return scoped(&p.Meta, KindServicePlan, KindNamespacedServicePlan)
}
func (*Instance) kind() string { return KindInstance }
func (*Binding) kind() string  { return KindBinding }

// Kind is the kind of a broker, class, plan, instance or binding, as the
// change feed names it.
func Kind(obj any) string {
	if o, ok := obj.(object); ok {
		return o.kind()
	}
	return ""
}

var tables = map[string]string{
	KindBroker:                 "catalog.brokers",
	KindServiceClass:           "catalog.service_classes",
	KindServicePlan:            "catalog.service_plans",
	KindNamespacedBroker:       "catalog.brokers",
	KindNamespacedServiceClass: "catalog.service_classes",
	KindNamespacedServicePlan:  "catalog.service_plans",
	KindInstance:               "catalog.instances",
	KindBinding:                "catalog.bindings",
}

// Change types of the feed, as Kubernetes watch events name them.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
)

type change struct {
	typ string
	obj object
}

func (w *txn) changed(typ string, obj object) { w.changes = append(w.changes, change{typ, obj}) }

// changedStatus records that obj's status changed to status (its JSON):
// the row is written when the transaction's changes are stamped (record).
func (w *txn) changedStatus(obj object, status []byte) {
	if w.statuses == nil {
		w.statuses = map[string]string{}
	}
	w.statuses[obj.meta().ID] = string(status)
	w.changed(Modified, obj)
}

// statusesOf are the new statuses of the objects with these ids, "" for
// those whose status is unchanged; some reports whether there is one.
func (w *txn) statusesOf(ids []string) (out []string, some bool) {
	out = make([]string, len(ids))
	for i, id := range ids {
		out[i] = w.statuses[id]
		some = some || out[i] != ""
	}
	return out, some
}

func (w *txn) read(obj object) {
	if !w.publishing {
		return
	}
	if w.names == nil {
		w.names = map[[2]string][2]string{}
	}
	m := obj.meta()
	w.names[[2]string{obj.kind(), m.ID}] = [2]string{m.Name, m.Namespace}
}

// unchangedKey carries the resourceVersion a context's deletes expect
// (IfUnchanged).
type unchangedKey struct{}

// IfUnchanged returns a context in which the store's deletes refuse, with
// a stale ConflictError as an update's expectRV does, an object whose
// resourceVersion is no longer rv. The check is made under the delete's
// row lock, so a write that lands between a caller's read and its delete
// is seen. A front door uses it for Kubernetes'
// preconditions.resourceVersion.
func IfUnchanged(ctx context.Context, rv int64) context.Context {
	return context.WithValue(ctx, unchangedKey{}, rv)
}

// unchanged tells whether m is still at the resourceVersion ctx's delete
// expects (IfUnchanged), or refuses it as stale.
func unchanged(ctx context.Context, kind string, m *Meta) error {
	if rv, ok := ctx.Value(unchangedKey{}).(int64); ok && m.ResourceVersion != rv {
		return stale(kind, m.Namespace, m.Name)
	}
	return nil
}

// dryRunKey marks a context whose writes are dry runs (WithDryRun).
type dryRunKey struct{}

// WithDryRun returns a context in which the store's writes are dry runs:
// each checks and makes its change as it would, then rolls it back, so a
// dry run answers what the write would (its refusals, the objects as it
// would leave them, at their old resourceVersion) and records nothing —
// no change in the feed, no history entry. A front door uses it for
// Kubernetes' dryRun=All.
func WithDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

func isDryRun(ctx context.Context) bool {
	dry, _ := ctx.Value(dryRunKey{}).(bool)
	return dry
}

// write runs fn in a transaction and, if fn changed objects, gives them the
// next revision and records them in the change feed as it commits. In a
// dry run (WithDryRun) it rolls the transaction back instead.
func (s *Store) write(ctx context.Context, fn func(w *txn) error) (int64, error) {
	w, err := beginWrite(ctx, s.pool)
	if err != nil {
		return 0, err
	}
	defer w.end(ctx)
	w.publishing = s.publish != nil
	if err := fn(w); err != nil {
		return 0, err
	}
	if isDryRun(ctx) {
		// The queued statements hold checks (a quota, a revision) and
		// rows whose constraints refuse: they run, then w.end rolls back.
		return 0, w.flush(ctx)
	}
	var rev int64
	var revs []int64
	var sql string
	var args []any
	if len(w.changes) > 0 || w.staged != nil {
		if sql, args, err = record(w); err != nil {
			return 0, err
		}
	}
	if err := w.commit(ctx, sql, args, &rev, &revs); err != nil {
		return 0, err
	}
	if sql != "" {
		s.notifier.announce(rev)
		revOf := make(map[string]int64, len(revs))
		for i, id := range args[1].([]string) {
			revOf[id] = revs[i]
		}
		for _, c := range w.changes {
			if c.typ != Deleted {
				c.obj.meta().ResourceVersion = revOf[c.obj.meta().ID]
			}
		}
	}
	if s.publish != nil && len(w.events) > 0 {
		s.publish(w.objectEvents())
	}
	return rev, nil
}

// objectEvents are the events w recorded, with the names of their objects,
// which the transaction changed or read (an event about neither is left
// out: none is recorded so).
func (w *txn) objectEvents() []ObjectEvent {
	for _, c := range w.changes {
		w.read(c.obj)
	}
	out := make([]ObjectEvent, 0, len(w.events))
	for _, e := range w.events {
		if n, ok := w.names[[2]string{e.Kind, e.ObjectID}]; ok {
			out = append(out, ObjectEvent{Event: e, Name: n[0], Namespace: n[1]})
		}
	}
	return out
}

// record appends w's changes to the feed, each at a revision of its own,
// and stamps each changed row that does not carry its revision yet with
// it, and with its new status. The first revision is the transaction's
// (txn.revision): taken from the catalog.revisions sequence with the
// advisory lock that tells readers it is in flight, unless a creation of
// the transaction took it already for the row it inserted, whose change
// then has it. The others come from the sequence after it, so while the
// transaction is in flight readers hold back at the first (revision.go).
// A revision per change lets a watcher resume after any change it was
// sent: a transaction's changes sharing one revision, a watch that ended
// between two of them lost the rest.
//
// It is the transaction's last statement, sent with its commit
// (txn.commit): the revisions are taken once every row the transaction
// changes is locked, so of two writes of one row (or one name) the later
// to commit has the higher revision. Writes do not wait for one another
// here: each holds catalog.revision in ROW EXCLUSIVE mode from before it
// takes its revision until it commits, which tells the feed's readers
// which revisions may still be in flight (revision.go).
//
// While it holds that lock, a transaction must not wait for a lock a
// write outside its last round trip holds: rows are read FOR NO KEY
// UPDATE, never FOR UPDATE, so a binding's foreign-key check (FOR KEY
// SHARE on its instance) never waits for an instance another writer
// holds. The objects' documents are encoded before the revisions are
// known; the statement stamps them into them, and write on the objects.
//
// The statement returns the transaction's highest revision and those of
// w.changes' objects, by id.
func record(w *txn) (string, []any, error) {
	ids := map[string][]string{}
	for table, staged := range w.staged {
		ids[table] = slices.Clone(staged)
	}
	// first is the row inserted with the first revision: a transaction
	// creates one object at most, and any other is stamped.
	var first *string
	for id := range w.inserted {
		if first == nil {
			first = &id
		}
	}
	var kinds, objectIDs, namespaces, names, types, docs []string
	seen := map[string]int{}
	for _, c := range w.changes {
		m := c.obj.meta()
		setSpecLabels(c.obj)
		i, dup := seen[m.ID]
		if !dup && c.typ != Deleted && ((first == nil || m.ID != *first) || w.statuses[m.ID] != "") {
			ids[tables[c.obj.kind()]] = append(ids[tables[c.obj.kind()]], m.ID)
		}
		doc, err := json.Marshal(c.obj)
		if err != nil {
			return "", nil, err
		}
		typ := c.typ
		// An object written twice in one transaction appears once, as it
		// ended, and its row is stamped once.
		if dup {
			if types[i] == Added && typ == Modified {
				typ = Added
			}
			kinds[i], namespaces[i], names[i], types[i], docs[i] = c.obj.kind(), m.Namespace, m.Name, typ, string(doc)
			continue
		}
		seen[m.ID] = len(kinds)
		kinds, objectIDs, namespaces = append(kinds, c.obj.kind()), append(objectIDs, m.ID), append(namespaces, m.Namespace)
		names, types, docs = append(names, m.Name), append(types, typ), append(docs, string(doc))
	}
	args := []any{kinds, objectIDs, namespaces, names, types, docs}
	changes := `unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[]) AS c(kind, object_id, namespace, name, type, object)`
	if w.staged != nil {
		changes = `(SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[])
			UNION ALL SELECT * FROM pg_temp.staged_changes) AS c(kind, object_id, namespace, name, type, object)`
	}
	rs, args := revisions(changes, len(objectIDs) > 1 || w.staged != nil, first, args)
	stamps, args := stampRows(w, ids, args, rs.of)
	// A deleted object keeps, in its feed row, the resourceVersion it had.
	return `WITH rev AS MATERIALIZED (SELECT ` + w.revision() + ` AS value)` + rs.ctes + stamps + `,
		feed AS (INSERT INTO catalog.changes (revision, kind, object_id, namespace, name, type, object)
			SELECT r.revision, r.kind, r.object_id, r.namespace, r.name, r.type,
				CASE WHEN r.type = '` + Deleted + `' THEN r.object::jsonb ELSE r.object::jsonb || jsonb_build_object('resourceVersion', r.revision) END
			FROM ` + rs.from + `)
		` + rs.result, args, nil
}

// revisionsSQL is the part of record's statement that gives each change
// its revision: ctes to add to the statement, from the changes with their
// revisions (as r, with r.revision), of(p) the revision of the object
// whose id is parameter p, and the statement's result.
type revisionsSQL struct {
	ctes, from, result string
	of                 func(p int) string
}

// revisions builds revisionsSQL for changes (the FROM item of the
// changes), many of them or one, first being the row inserted with the
// transaction's first revision; args gains its parameters.
func revisions(changes string, many bool, first *string, args []any) (revisionsSQL, []any) {
	// One change (the usual write) has the transaction's revision. Many are numbered, the row
	// inserted with the first revision first: the first has the
	// transaction's and the others the sequence's next (rev is read before
	// any of them, as part of the row the CASE reads). A stamp of many
	// rows joins ids, which only the form for many changes builds, and
	// each row is stamped once (record lists it once).
	rs := revisionsSQL{
		from:   `(SELECT c.*, rev.value AS revision FROM rev, ` + changes + `) r`,
		of:     func(int) string { return `(SELECT value FROM rev)` },
		result: `SELECT value, ARRAY[value] FROM rev`,
	}
	if many {
		// Numbered as they come unless a row was inserted with the first
		// revision (a sort of every document, else), and the revisions
		// alone kept apart for the stamps and the result to join.
		order := ``
		if first != nil {
			args = append(args, first)
			order = fmt.Sprintf(`ORDER BY c.object_id = $%d::uuid DESC`, len(args))
		}
		rs.ctes = `,
		numbered AS (SELECT c.*, row_number() OVER (` + order + `) AS n FROM ` + changes + `),
		revs AS MATERIALIZED (SELECT c.*, CASE WHEN c.n = 1 THEN rev.value ELSE nextval('catalog.revisions') END AS revision FROM rev, numbered c),
		ids AS MATERIALIZED (SELECT object_id, revision FROM revs)`
		rs.from = `revs r`
		rs.of = func(p int) string { return fmt.Sprintf(`(SELECT revision FROM ids WHERE object_id = $%d::uuid)`, p) }
		rs.result = `SELECT (SELECT max(revision) FROM ids),
			coalesce((SELECT array_agg(r.revision ORDER BY u.i) FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, i) JOIN ids r ON r.object_id = u.id), '{}')`
	}
	return rs, args
}

// stampRows is the part of record's statement that stamps the rows of ids
// (by table) with their revisions (revOf(p): that of the object whose id
// is parameter p) and their new statuses, and args with its parameters.
func stampRows(w *txn, ids map[string][]string, args []any, revOf func(int) string) (string, []any) {
	var stamps strings.Builder
	for _, table := range slices.Sorted(maps.Keys(ids)) {
		args = append(args, ids[table])
		statuses, some := w.statusesOf(ids[table])
		// The new statuses go in with the stamp: one change of each row,
		// not two (a second change of a row in the same transaction costs
		// a row version and, for a binding, a foreign-key check).
		status := ""
		if len(statuses) == 1 {
			// One row, the usual write, by its key: a join has a cached
			// plan that is made once, for the table as it was then (a new
			// table's: a scan of the whole table), and kept as the table
			// grows, so each write read every row.
			args[len(args)-1] = ids[table][0]
			id := len(args)
			if some {
				args = append(args, statuses[0])
				status = fmt.Sprintf(`, status = coalesce(nullif($%d::text, '')::jsonb, t.status)`, len(args))
			}
			fmt.Fprintf(&stamps, `, stamp%d AS (UPDATE %s t SET resource_version = %s%s WHERE t.id = $%d::uuid)`,
				id, table, revOf(id), status, id)
			continue
		}
		if some {
			args = append(args, statuses)
			status = `, status = coalesce(nullif(s.status, '')::jsonb, t.status)`
		} else {
			args = append(args, make([]string, len(ids[table])))
		}
		fmt.Fprintf(&stamps, `, stamp%d AS (UPDATE %s t SET resource_version = r.revision%s
			FROM unnest($%d::uuid[], $%d::text[]) AS s(id, status) JOIN ids r ON r.object_id = s.id WHERE t.id = s.id)`,
			len(args), table, status, len(args)-1, len(args))
	}
	return stamps.String(), args
}

// stage records changes of objects the transaction wrote, as changed does,
// but sends their documents to a temporary table of the transaction at
// once instead of keeping them until the commit; record takes them from
// there. A write of many large objects (a catalogue of thousands of plans)
// then holds one chunk of documents at a time. An object staged must not
// also be changed, nor staged twice.
func (w *txn) stage(ctx context.Context, changes []change) error {
	if len(changes) == 0 {
		return nil
	}
	if w.staged == nil {
		// A round trip of its own: a batch prepares its statements before
		// running any, and the INSERT needs the table.
		if _, err := w.Exec(ctx, `CREATE TEMPORARY TABLE staged_changes (kind text, object_id uuid, namespace text, name text, type text, object text) ON COMMIT DROP`); err != nil {
			return mapErr(err)
		}
		w.staged = map[string][]string{}
	}
	kinds, ids, namespaces, names, types, docs := make([]string, len(changes)), make([]string, len(changes)), make([]string, len(changes)),
		make([]string, len(changes)), make([]string, len(changes)), make([]string, len(changes))
	for i, c := range changes {
		m := c.obj.meta()
		setSpecLabels(c.obj)
		doc, err := json.Marshal(c.obj)
		if err != nil {
			return err
		}
		kinds[i], ids[i], namespaces[i], names[i], types[i], docs[i] = c.obj.kind(), m.ID, m.Namespace, m.Name, c.typ, string(doc)
		if c.typ != Deleted {
			table := tables[c.obj.kind()]
			w.staged[table] = append(w.staged[table], m.ID)
		}
		w.read(c.obj)
	}
	w.queue(nil, `INSERT INTO pg_temp.staged_changes SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[])`,
		kinds, ids, namespaces, names, types, docs)
	return w.flush(ctx)
}

// metaDoc is the JSON kept in the metadata column.
type metaDoc struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Finalizers  []string          `json:"finalizers,omitempty"`
	Extra       json.RawMessage   `json:"extra,omitempty"`
}

func encodeMeta(m *Meta) ([]byte, error) {
	return json.Marshal(metaDoc{Labels: m.Labels, Annotations: m.Annotations, Finalizers: m.Finalizers, Extra: m.Extra})
}

// decodeMeta sets m's labels, annotations, finalizers and extra from one
// metadata document. For one document, go-json-experiment's v1 Unmarshal
// allocates less than a metaReader (a list's rows use one) and decodes it
// twice as fast as encoding/json (BenchmarkMetaDecode).
func decodeMeta(raw []byte, m *Meta) error {
	var md metaDoc
	if err := jsonv1.Unmarshal(raw, &md); err != nil {
		return err
	}
	m.Labels, m.Annotations, m.Finalizers, m.Extra = md.Labels, md.Annotations, md.Finalizers, md.Extra
	return nil
}
