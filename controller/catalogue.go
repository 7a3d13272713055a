package controller

import (
	"context"
	"sync"

	"github.com/bindery-dev/bindery/catalog"
)

// catalogue keeps the classes, plans and brokers the engine read, until
// the change feed says that any of them changed: every reconcile needs
// its object's three, which change only when a broker is registered,
// changed or relisted. Objects in it are shared: never changed. Keys are
// namespace/name, the namespace empty for the cluster's.
type catalogue struct {
	mu sync.Mutex
	// epoch counts the invalidations, so that a read begun before one
	// is not kept after it.
	epoch   uint64
	classes map[string]*catalog.ServiceClass
	plans   map[string]*catalog.ServicePlan
	brokers map[string]*catalog.Broker
}

func newCatalogue() *catalogue {
	return &catalogue{classes: map[string]*catalog.ServiceClass{}, plans: map[string]*catalog.ServicePlan{}, brokers: map[string]*catalog.Broker{}}
}

// invalidate forgets everything: a class, a plan or a broker changed.
func (k *catalogue) invalidate() {
	k.mu.Lock()
	k.epoch++
	clear(k.classes)
	clear(k.plans)
	clear(k.brokers)
	k.mu.Unlock()
}

// lookup returns m's entry for name, or reads it and keeps it (what is
// not found is read again each time).
func lookup[T any](k *catalogue, m map[string]T, name string, read func() (T, error)) (T, error) {
	k.mu.Lock()
	v, ok := m[name]
	epoch := k.epoch
	k.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	k.mu.Lock()
	if k.epoch == epoch {
		m[name] = v
	}
	k.mu.Unlock()
	return v, nil
}

// The getters take the namespace of a namespace's own class, plan or
// broker, "" for the cluster's.

func (c *Controller) getClass(ctx context.Context, namespace, name string) (*catalog.ServiceClass, error) {
	return lookup(c.catalogue, c.catalogue.classes, namespace+"/"+name, func() (*catalog.ServiceClass, error) { return c.store.GetClassIn(ctx, namespace, name) })
}

func (c *Controller) getPlan(ctx context.Context, namespace, name string) (*catalog.ServicePlan, error) {
	return lookup(c.catalogue, c.catalogue.plans, namespace+"/"+name, func() (*catalog.ServicePlan, error) { return c.store.GetPlanIn(ctx, namespace, name) })
}

func (c *Controller) getBroker(ctx context.Context, namespace, name string) (*catalog.Broker, error) {
	return lookup(c.catalogue, c.catalogue.brokers, namespace+"/"+name, func() (*catalog.Broker, error) { return c.store.GetBrokerIn(ctx, namespace, name) })
}
