package catalog

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// New instances and bindings are checked against their class and plan,
// which change only when a broker is registered, relisted, changed or
// deleted. Reading both for every creation was two of an instance's four
// round trips and two of a binding's five, so the store keeps what it
// read, with the catalogue's version (migrations/catalog 0012) it read it
// at: the version first, then the rows. A creation that used what was
// kept checks in its own transaction, with its other statements, that the
// version has not moved since (catalog.expect_catalogue_version); when it
// has, the transaction fails, what was kept is forgotten, and the creation
// is made again reading the catalogue as it is. Nothing is trusted that
// the database has not confirmed, so every replica can keep its own.

// errCatalogueChanged says a creation used classes and plans read before
// the catalogue last changed.
var errCatalogueChanged = errors.New("the catalogue changed since its classes and plans were read")

// catalogueChangedCode is the SQLSTATE catalog.expect_catalogue_version
// raises.
const catalogueChangedCode = "BDC01"

// catalogueCache keeps classes and plans that new objects resolved to, all
// read at one version of the catalogue. Entries are shared: never changed.
type catalogueCache struct {
	mu      sync.Mutex
	version int64
	entries map[string]resolvedPair
}

type resolvedPair struct {
	class *ServiceClass
	plan  *ServicePlan
}

// get returns the entry for key and the version it was read at.
func (c *catalogueCache) get(key string) (resolvedPair, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e, c.version, ok
}

// put keeps an entry read at version: entries of an older version are
// forgotten, and an entry older than what is kept (or than a version
// known to be stale) is not kept.
func (c *catalogueCache) put(key string, version int64, e resolvedPair) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case version < c.version:
		return
	case c.entries == nil || version > c.version || len(c.entries) >= maxCatalogueEntries:
		// Full (keys name namespaces too, so entries grow with them):
		// start again, as after a change of the catalogue.
		c.entries, c.version = map[string]resolvedPair{}, version
	}
	c.entries[key] = e
}

// maxCatalogueEntries bounds the cache of resolved classes and plans.
const maxCatalogueEntries = 10000

// forget drops every entry read at stale or before: the catalogue has
// changed since; what a slower reader read at stale is not kept either.
func (c *catalogueCache) forget(stale int64) {
	c.mu.Lock()
	if c.version <= stale {
		c.entries, c.version = nil, stale+1
	}
	c.mu.Unlock()
}

// catalogueReader resolves the classes and plans of new objects: through
// the store's cache when cached, else straight from q, as every other
// write reads them. q reads what is not kept.
type catalogueReader struct {
	s      *Store
	q      querier
	cached bool
	// version is the catalogue's version that what was resolved was read
	// at, once used is set.
	version int64
	used    bool
}

// note records that the creation relies on the catalogue at version.
func (r *catalogueReader) note(version int64) {
	if r.used && r.version != version {
		// Two reads at different versions: the older one is checked and
		// fails if the catalogue moved, which is what matters.
		r.version = min(r.version, version)
		return
	}
	r.version, r.used = version, true
}

// catalogueVersion reads the catalogue's version.
func (r *catalogueReader) catalogueVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := r.q.QueryRow(ctx, `SELECT value FROM catalog.catalogue_version`).Scan(&v); err != nil {
		return 0, mapErr(err)
	}
	return v, nil
}

// resolveNew is resolveNew, through the cache when r is cached. Only what
// resolves is kept: a reference that waits is read again next time.
func (r *catalogueReader) resolveNew(ctx context.Context, spec *InstanceSpec, namespace string, path *field.Path, errs *field.ErrorList) (*ServicePlan, error) {
	if !r.cached {
		return resolveNew(ctx, r.q, spec, namespace, path, errs)
	}
	clearRefs(spec)
	n, nerrs := naming(spec, namespace, path)
	if len(nerrs) > 0 {
		*errs = append(*errs, nerrs...)
		return nil, nil
	}
	// The instance's namespace too: a plan may be hidden from it.
	key := "n\x00" + n.classField + "\x00" + n.classVal + "\x00" + n.planVal + "\x00" + n.namespace + "\x00" + n.visibleTo
	if e, v, ok := r.s.catalogue.get(key); ok {
		r.note(v)
		if n.planVal == "" {
			n.setPlanName(spec, e.plan)
		}
		setRefs(spec, e.class, e.plan)
		return e.plan, nil
	}
	v, err := r.catalogueVersion(ctx)
	if err != nil {
		return nil, err
	}
	class, plan, err := lookupPlan(ctx, r.q, spec, n)
	if ref, ok := AsReference(err); ok {
		if ref.refused != "" {
			*errs = append(*errs, bad(path.Child(ref.field), ref.detail()))
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.s.catalogue.put(key, v, resolvedPair{class, plan})
	r.note(v)
	setRefs(spec, class, plan)
	return plan, nil
}

// resolvedPlan is resolvedPlan, through the cache when r is cached.
func (r *catalogueReader) resolvedPlan(ctx context.Context, in *Instance) (*ServiceClass, *ServicePlan, error) {
	if !r.cached {
		return resolvedPlan(ctx, r.q, in)
	}
	classRef, planRef, ns := in.Refs()
	key := "r\x00" + ns + "\x00" + refName(classRef) + "\x00" + refName(planRef)
	if e, v, ok := r.s.catalogue.get(key); ok {
		r.note(v)
		return e.class, e.plan, nil
	}
	v, err := r.catalogueVersion(ctx)
	if err != nil {
		return nil, nil, err
	}
	class, plan, err := resolvedPlan(ctx, r.q, in)
	if err != nil {
		return nil, nil, err
	}
	r.s.catalogue.put(key, v, resolvedPair{class, plan})
	r.note(v)
	return class, plan, nil
}

// check queues, in w, the check that the catalogue has not changed since
// what the creation relied on was read; it fails the transaction with
// errCatalogueChanged if it has.
func (r *catalogueReader) check(w *txn) {
	if !r.used {
		return
	}
	w.queue(func(err error) error {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == catalogueChangedCode {
			return errCatalogueChanged
		}
		return mapErr(err)
	}, `SELECT catalog.expect_catalogue_version($1)`, r.version)
}

// createWithCatalogue runs a creation with what the store keeps of the
// catalogue; if the catalogue changed meanwhile, once more reading it
// afresh (and keeping it), and should it change again before that
// commits, a last time reading it in the creation's transaction as every
// other write does. create gets a reader to resolve with, whose q it sets
// to its transaction.
//
// A creation refused on what was kept never reaches its transaction's
// check: the version is read then, and a refusal the catalogue may have
// since changed its mind on is tried again too.
func (s *Store) createWithCatalogue(ctx context.Context, create func(r *catalogueReader) error) error {
	for range 2 {
		r := &catalogueReader{s: s, cached: true}
		err := create(r)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errCatalogueChanged):
		case !r.used:
			return err
		default:
			v, verr := (&catalogueReader{q: s.pool}).catalogueVersion(ctx)
			if verr != nil || v == r.version {
				return err
			}
		}
		s.catalogue.forget(r.version)
	}
	return create(&catalogueReader{})
}
