// Package catalog is Bindery's source of truth: brokers, the service
// classes and plans they offer, service instances and bindings, their
// credentials (sealed) and history, in PostgreSQL schema catalog.
//
// Every write goes through Store, in one transaction that also appends to
// the change feed: each transaction takes the next revision as its last
// step (so revisions follow commit order), stamps it as the resourceVersion
// of every object it wrote, records the objects in catalog.changes and
// notifies listeners on commit. The REST API (restapi), the engine
// (controller/) and the Kubernetes API read and write through Store only,
// and follow the change feed through Store.Feed: Follow catches up from a
// revision and then keeps up with the notifications, and RunPruner, which
// every process that owns the catalog runs, keeps the feed bounded.
//
// The files follow the store's responsibilities: the objects
// (brokers.go, marketplace.go for classes and plans, instances.go,
// bindings.go, raw.go for the objects as stored), status.go (the engine's
// half of each object), feed.go, follow.go and prune.go (the change
// feed), relist.go (fetching catalogues), icons.go (the services' icons,
// fetched with them), offerings.go and metadata.go (what a marketplace
// page shows), claims.go, history.go, tokens.go, errors.go (validation),
// and quota.go, quota_usage.go, resourcequotas.go and visibility.go (what
// a namespace may take and see; catalog/resourcequota copies the
// cluster's ResourceQuotas in).
package catalog
