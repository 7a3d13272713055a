// Package broker is an Open Service Broker API 2.17 server
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md).
//
// It keeps its records in PostgreSQL (schema broker): the catalogue it
// serves, instances, bindings with their credentials sealed by
// internal/keyring, and one row per operation. Asynchronous operations are
// durable River jobs; synchronous ones run in the request and leave a River
// job behind as a safety net, so an operation cut off by a crash is finished
// by whichever broker process runs next. The work itself is done by a Driver
// per service (broker/postgresql provisions PostgreSQL databases).
package broker
