package catalog

import (
	"context"
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The store keeps the service classes and plans it read (and their
// brokers), in one cache that new objects' creations and the engine's
// reconciles both read through: they change only when a broker is
// registered, relisted, changed or deleted.
//
// Creations check what they used: reading both for every creation was two
// of an instance's four round trips and two of a binding's five, so the
// cache notes the catalogue's version (migrations/catalog 0012, 0026, 0027) it read
// them at (the version first, then the rows), and a creation that used
// what was kept checks in its own transaction, with its other statements,
// that the version has not moved since (catalog.expect_catalogue_version);
// when it has, the transaction fails, what was kept is forgotten, and the
// creation is made again reading the catalogue as it is. Nothing a
// creation writes is trusted that the database has not confirmed, so
// every replica can keep its own.
//
// The engine reads a reconcile's class, plan and broker through it
// (CachedClassIn, CachedPlanIn, CachedBrokerIn) and has it forget a
// namespace's when the change feed says one of them changed
// (ForgetCached): its writes check their objects' own state, and a broker
// call made with a class or plan changed a moment before is what any
// change racing a call makes. What is read by name is kept per namespace
// ("" for the cluster's) and a namespace's reads name its own objects
// only (a namespaced plan's broker is in its namespace, and an instance of
// a cluster plan reads it, its class and broker under ""), so a change
// forgets its namespace's alone: one team's broker that relists every
// second leaves every other team's reads to the cache.

// errCatalogueChanged says a creation used classes and plans read before
// the catalogue last changed.
var errCatalogueChanged = errors.New("the catalogue changed since its classes and plans were read")

// catalogueChangedCode is the SQLSTATE catalog.expect_catalogue_version
// raises.
const catalogueChangedCode = "BDC01"

// planCache keeps the classes and plans that new objects resolved to, all
// read at one version of the catalogue, and the classes, plans and brokers
// the engine read by name. Entries are shared: never changed.
type planCache struct {
	mu      sync.Mutex
	version int64
	entries map[string]resolvedPair
	// named is what was read by name, by namespace; nNamed counts its
	// namespaces and entries.
	named  map[string]*namedEntries
	nNamed int
}

// namedEntries is what was read by name in one namespace. Forgetting the
// namespace drops it, and a read keeps what it read only in the one it
// began with: a read begun before a forget is not kept after.
type namedEntries struct {
	classes map[string]*ServiceClass
	plans   map[string]*ServicePlan
	brokers map[string]*Broker
}

type resolvedPair struct {
	class *ServiceClass
	plan  *ServicePlan
}

// get returns the entry for key and the version it was read at.
func (c *planCache) get(key string) (resolvedPair, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e, c.version, ok
}

// put keeps an entry read at version: entries of an older version are
// forgotten, and an entry older than what is kept (or than a version
// known to be stale) is not kept.
func (c *planCache) put(key string, version int64, e resolvedPair) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case version < c.version:
		return
	case c.entries == nil || version > c.version || len(c.entries) >= maxCachedPlans:
		// Full (keys name namespaces too, so entries grow with them):
		// start again, as after a change of the catalogue.
		c.entries, c.version = map[string]resolvedPair{}, version
	}
	c.entries[key] = e
}

// maxCachedPlans bounds the entries the cache keeps, and, apart, the
// namespaces and entries it keeps read by name.
const maxCachedPlans = 10000

// forget drops every entry read at stale or before: the catalogue has
// changed since; what a slower reader read at stale is not kept either.
// What was read by name stays: the version moves with any namespace's
// classes and plans, and the feed tells the engine which one changed
// (ForgetCached).
func (c *planCache) forget(stale int64) {
	c.mu.Lock()
	if c.version <= stale {
		c.entries, c.version = nil, stale+1
	}
	c.mu.Unlock()
}

// forgetNamed drops what was read by name in namespace.
func (c *planCache) forgetNamed(namespace string) {
	c.mu.Lock()
	if n, ok := c.named[namespace]; ok {
		c.nNamed -= 1 + len(n.classes) + len(n.plans) + len(n.brokers)
		delete(c.named, namespace)
	}
	c.mu.Unlock()
}

// cachedByName returns name from the map that pick chooses among
// namespace's, or reads it and keeps it (what is not found is read again
// each time).
func cachedByName[T any](c *planCache, namespace, name string, pick func(*namedEntries) *map[string]T, read func() (T, error)) (T, error) {
	c.mu.Lock()
	n := c.namedLocked(namespace)
	v, ok := (*pick(n))[name]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.named[namespace] == n {
		if c.nNamed >= maxCachedPlans {
			// Full: start again, with this namespace's alone.
			c.named = nil
			n = c.namedLocked(namespace)
		}
		m := pick(n)
		if *m == nil {
			*m = map[string]T{}
		}
		if _, had := (*m)[name]; !had {
			c.nNamed++
		}
		(*m)[name] = v
	}
	c.mu.Unlock()
	return v, nil
}

// namedLocked returns what was read by name in namespace, empty at first.
// A full cache starts again (namespaces, and their names, come and go).
func (c *planCache) namedLocked(namespace string) *namedEntries {
	n := c.named[namespace]
	if n == nil {
		if c.named == nil || c.nNamed >= maxCachedPlans {
			c.named, c.nNamed = map[string]*namedEntries{}, 0
		}
		n = &namedEntries{}
		c.named[namespace] = n
		c.nNamed++
	}
	return n
}

// CachedClassIn is GetClassIn through the store's cache of classes and
// plans: what was read is kept until ForgetCached forgets its namespace.
func (s *Store) CachedClassIn(ctx context.Context, namespace, name string) (*ServiceClass, error) {
	return cachedByName(&s.plans, namespace, name, func(n *namedEntries) *map[string]*ServiceClass { return &n.classes },
		func() (*ServiceClass, error) { return s.GetClassIn(ctx, namespace, name) })
}

// CachedPlanIn is GetPlanIn through the store's cache (CachedClassIn).
func (s *Store) CachedPlanIn(ctx context.Context, namespace, name string) (*ServicePlan, error) {
	return cachedByName(&s.plans, namespace, name, func(n *namedEntries) *map[string]*ServicePlan { return &n.plans },
		func() (*ServicePlan, error) { return s.GetPlanIn(ctx, namespace, name) })
}

// CachedBrokerIn is GetBrokerIn through the store's cache (CachedClassIn).
func (s *Store) CachedBrokerIn(ctx context.Context, namespace, name string) (*Broker, error) {
	return cachedByName(&s.plans, namespace, name, func(n *namedEntries) *map[string]*Broker { return &n.brokers },
		func() (*Broker, error) { return s.GetBrokerIn(ctx, namespace, name) })
}

// ForgetCached drops what the store keeps of the classes, plans and
// brokers of namespace ("" for the cluster's) read by name: the change
// feed says one of them changed. The other namespaces' stay: none of
// their reads resolves through another namespace's objects.
func (s *Store) ForgetCached(namespace string) {
	s.plans.forgetNamed(namespace)
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
	n, nerrs := newNaming(spec, namespace, path)
	if len(nerrs) > 0 {
		*errs = append(*errs, nerrs...)
		return nil, nil
	}
	// The instance's namespace too: a plan may be hidden from it.
	key := "n\x00" + n.classField + "\x00" + n.classVal + "\x00" + n.planVal + "\x00" + n.namespace + "\x00" + n.visibleTo
	if e, v, ok := r.s.plans.get(key); ok {
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
	r.s.plans.put(key, v, resolvedPair{class, plan})
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
	if e, v, ok := r.s.plans.get(key); ok {
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
	r.s.plans.put(key, v, resolvedPair{class, plan})
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
	w.queueCheck([]string{catalogueChangedCode}, func(error) error { return errCatalogueChanged },
		`catalog.expect_catalogue_version($1)`, r.version)
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
		s.plans.forget(r.version)
	}
	return create(&catalogueReader{})
}
