-- The broker's own state: its service catalogue, the instances and bindings
-- it manages and every operation it ran on them.
CREATE SCHEMA IF NOT EXISTS broker;

-- The catalogue the broker serves, as loaded at its last start.
CREATE TABLE broker.catalog (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    document   jsonb NOT NULL,
    etag       text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE broker.instances (
    id                  text PRIMARY KEY,
    service_id          text NOT NULL,
    plan_id             text NOT NULL,
    -- provisioning | ready | failed | deprovisioning
    state               text NOT NULL,
    parameters          jsonb,
    context             jsonb,
    organization_guid   text,
    space_guid          text,
    maintenance_version text,
    dashboard_url       text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE broker.bindings (
    id                     text PRIMARY KEY,
    instance_id            text NOT NULL REFERENCES broker.instances (id) ON DELETE CASCADE,
    service_id             text NOT NULL,
    plan_id                text NOT NULL,
    -- binding | bound | failed | unbinding
    state                  text NOT NULL,
    parameters             jsonb,
    context                jsonb,
    bind_resource          jsonb,
    app_guid               text,
    predecessor_binding_id text,
    -- AES-GCM sealed JSON of the credentials (internal/keyring).
    credentials            bytea,
    endpoints              jsonb,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bindings_instance_idx ON broker.bindings (instance_id);

-- One row per OSB request that changes something. The row outlives its
-- instance or binding so that last_operation can still answer for it.
CREATE TABLE broker.operations (
    id                   text PRIMARY KEY,
    instance_id          text NOT NULL,
    binding_id           text,
    -- provision | update | deprovision | bind | unbind
    kind                 text NOT NULL,
    -- in progress | succeeded | failed
    state                text NOT NULL,
    async                boolean NOT NULL,
    description          text,
    -- what the operation was asked to do (plan, parameters, maintenance).
    request              jsonb NOT NULL DEFAULT '{}',
    instance_usable      boolean,
    update_repeatable    boolean,
    originating_platform text,
    originating_identity jsonb,
    request_identity     text,
    river_job_id         bigint,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operations_instance_idx ON broker.operations (instance_id, created_at DESC);
CREATE INDEX operations_binding_idx ON broker.operations (binding_id, created_at DESC) WHERE binding_id IS NOT NULL;
-- At most one operation in progress per instance (binding_id NULL) and per binding.
CREATE UNIQUE INDEX operations_one_instance_op ON broker.operations (instance_id)
    WHERE state = 'in progress' AND binding_id IS NULL;
CREATE UNIQUE INDEX operations_one_binding_op ON broker.operations (binding_id)
    WHERE state = 'in progress' AND binding_id IS NOT NULL;
