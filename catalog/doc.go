// Package catalog is Bindery's source of truth: brokers, the service
// classes and plans they offer, service instances and bindings, their
// credentials (sealed) and history, in PostgreSQL schema catalog.
//
// Every write goes through Store, in one transaction that also appends to
// the change feed: each transaction takes the next revision as its last
// step (so revisions follow commit order), stamps it as the resourceVersion
// of every object it wrote, records the objects in catalog.changes and
// notifies listeners on commit. The REST API (restapi), the engine
// (controller/) and the Kubernetes API read and write through Store only.
package catalog
