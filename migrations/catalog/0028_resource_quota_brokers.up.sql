-- A ResourceQuota's hard limit on count/servicebrokers.servicecatalog.k8s.io
-- (catalog/resourcequota): a namespace's own brokers, which the server
-- bounds too (--max-brokers-per-namespace); the strictest wins.
ALTER TABLE catalog.resource_quotas ADD COLUMN brokers bigint;
