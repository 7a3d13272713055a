-- Back to one row per icon for every broker (0014's table), empty: the
-- release before this one fetches the icons again at each relist.
DROP TABLE catalog.service_icons;
CREATE TABLE catalog.service_icons (
    url_hash      bytea PRIMARY KEY,
    content_type  text NOT NULL DEFAULT '',
    body          bytea,
    etag          text NOT NULL DEFAULT '',
    problem       text NOT NULL DEFAULT '',
    fetched_at    timestamptz NOT NULL,
    next_fetch_at timestamptz NOT NULL
);
