-- The catalog: brokers, their service classes and plans, instances and
-- bindings, in the shapes of servicecatalog.k8s.io/v1beta1 (spec and status
-- kept as JSON, with the columns queries need beside them), plus the change
-- feed every write appends to.
CREATE SCHEMA IF NOT EXISTS catalog;

-- One row: the revision counter. Writers take its row lock as the last step
-- of their transaction, so revisions are handed out in commit order and a
-- watcher that has seen revision N has seen everything before it.
CREATE TABLE catalog.revision (
    id    boolean PRIMARY KEY DEFAULT true CHECK (id),
    value bigint NOT NULL
);
INSERT INTO catalog.revision (value) VALUES (0);

-- Every object written in one transaction shares that transaction's revision.
CREATE TABLE catalog.changes (
    revision   bigint NOT NULL,
    kind       text NOT NULL,
    object_id  uuid NOT NULL,
    namespace  text NOT NULL DEFAULT '',
    name       text NOT NULL,
    -- ADDED | MODIFIED | DELETED
    type       text NOT NULL,
    -- the object as it was after the change (before it, for DELETED)
    object     jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (revision, object_id)
);
CREATE INDEX changes_kind_idx ON catalog.changes (kind, revision);

CREATE TABLE catalog.brokers (
    id                   uuid PRIMARY KEY,
    name                 text NOT NULL UNIQUE,
    metadata             jsonb NOT NULL DEFAULT '{}',
    spec                 jsonb NOT NULL,
    status               jsonb NOT NULL DEFAULT '{}',
    -- sealed JSON of the credentials Bindery presents to the broker
    auth                 bytea,
    generation           bigint NOT NULL DEFAULT 1,
    resource_version     bigint NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    deletion_timestamp   timestamptz,
    -- relist scheduling, claimed in the database so one replica relists a broker at a time
    next_relist_at       timestamptz,
    relist_failures      integer NOT NULL DEFAULT 0,
    relist_claimed_until timestamptz
);
CREATE INDEX brokers_relist_idx ON catalog.brokers (next_relist_at) WHERE deletion_timestamp IS NULL;

CREATE TABLE catalog.service_classes (
    id               uuid PRIMARY KEY,
    broker_id        uuid NOT NULL REFERENCES catalog.brokers (id) ON DELETE CASCADE,
    name             text NOT NULL UNIQUE,
    external_id      text NOT NULL,
    external_name    text NOT NULL,
    position         integer NOT NULL,
    removed          boolean NOT NULL DEFAULT false,
    metadata         jsonb NOT NULL DEFAULT '{}',
    spec             jsonb NOT NULL,
    status           jsonb NOT NULL DEFAULT '{}',
    -- the broker's service object, every field as the broker sent it
    osb              jsonb NOT NULL,
    resource_version bigint NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (broker_id, external_id)
);

CREATE TABLE catalog.service_plans (
    id               uuid PRIMARY KEY,
    broker_id        uuid NOT NULL REFERENCES catalog.brokers (id) ON DELETE CASCADE,
    class_id         uuid NOT NULL REFERENCES catalog.service_classes (id) ON DELETE CASCADE,
    name             text NOT NULL UNIQUE,
    external_id      text NOT NULL,
    external_name    text NOT NULL,
    position         integer NOT NULL,
    removed          boolean NOT NULL DEFAULT false,
    free             boolean NOT NULL DEFAULT true,
    metadata         jsonb NOT NULL DEFAULT '{}',
    spec             jsonb NOT NULL,
    status           jsonb NOT NULL DEFAULT '{}',
    osb              jsonb NOT NULL,
    resource_version bigint NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (broker_id, external_id)
);
CREATE INDEX service_plans_class_idx ON catalog.service_plans (class_id, position);

CREATE TABLE catalog.instances (
    id                  uuid PRIMARY KEY,
    namespace           text NOT NULL,
    name                text NOT NULL,
    class_id            uuid REFERENCES catalog.service_classes (id),
    plan_id             uuid REFERENCES catalog.service_plans (id),
    metadata            jsonb NOT NULL DEFAULT '{}',
    spec                jsonb NOT NULL,
    status              jsonb NOT NULL DEFAULT '{}',
    generation          bigint NOT NULL DEFAULT 1,
    resource_version    bigint NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    deletion_timestamp  timestamptz,
    UNIQUE (namespace, name)
);
CREATE INDEX instances_plan_idx ON catalog.instances (plan_id);

CREATE TABLE catalog.bindings (
    id                  uuid PRIMARY KEY,
    namespace           text NOT NULL,
    name                text NOT NULL,
    instance_id         uuid NOT NULL REFERENCES catalog.instances (id),
    metadata            jsonb NOT NULL DEFAULT '{}',
    spec                jsonb NOT NULL,
    status              jsonb NOT NULL DEFAULT '{}',
    generation          bigint NOT NULL DEFAULT 1,
    resource_version    bigint NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    deletion_timestamp  timestamptz,
    UNIQUE (namespace, name)
);
CREATE INDEX bindings_instance_idx ON catalog.bindings (instance_id);

-- Credentials of bindings, sealed (internal/keyring) with the binding id as
-- associated data.
CREATE TABLE catalog.binding_credentials (
    binding_id uuid PRIMARY KEY REFERENCES catalog.bindings (id) ON DELETE CASCADE,
    sealed     bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- What happened to each object: every broker call and state change.
CREATE TABLE catalog.events (
    id         bigserial PRIMARY KEY,
    kind       text NOT NULL,
    object_id  uuid NOT NULL,
    -- Normal | Warning
    type       text NOT NULL,
    reason     text NOT NULL,
    message    text NOT NULL,
    operation  text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_object_idx ON catalog.events (object_id, id);

-- REST API tokens: only the SHA-256 of each token is kept.
CREATE TABLE catalog.api_tokens (
    id         uuid PRIMARY KEY,
    hash       bytea NOT NULL UNIQUE,
    role       text NOT NULL CHECK (role IN ('viewer', 'developer', 'admin')),
    created_at timestamptz NOT NULL DEFAULT now()
);
