-- Service icons are kept per broker (catalog/icons.go): each broker has a
-- share of the table, 256 icons, failed fetches counted; the icons its
-- services no longer name go at its next relist, and all of them go with
-- the broker. Before, one bound of 4,096 icons held for every broker
-- together, so one namespace's broker naming new icons at every relist
-- filled the table and no other broker's icon was stored. An icon two
-- brokers name is now kept once for each.
--
-- The table is a cache of what brokers' catalogues name, of at most 4,096
-- rows: it is made anew, empty, rather than rewritten, and each broker's
-- icons are fetched again at its next relist (the web UI draws its own
-- meanwhile). Dropping it takes its lock for a moment only, and
-- referencing catalog.brokers holds back changes of brokers only until
-- this commits, at once. A release before this one that still runs reads
-- the icons stored by this one, and fails to store its own (it logs why;
-- catalogue fetches go on).
DROP TABLE catalog.service_icons;
CREATE TABLE catalog.service_icons (
    broker_id     uuid NOT NULL REFERENCES catalog.brokers (id) ON DELETE CASCADE,
    url_hash      bytea NOT NULL,
    content_type  text NOT NULL DEFAULT '',
    body          bytea,
    etag          text NOT NULL DEFAULT '',
    problem       text NOT NULL DEFAULT '',
    fetched_at    timestamptz NOT NULL,
    next_fetch_at timestamptz NOT NULL,
    PRIMARY KEY (broker_id, url_hash)
);
