-- Service icons: the images brokers name in their services' metadata
-- (imageUrl), fetched through the broker egress policy or decoded from a
-- data: URI when a broker's catalogue is fetched, checked, and served by
-- Bindery itself (catalog/icons.go). Keyed by the SHA-256 of the URL. A
-- failed fetch is kept too (body NULL, problem set), so that it is not
-- tried again before next_fetch_at.
CREATE TABLE catalog.service_icons (
    url_hash      bytea PRIMARY KEY,
    content_type  text NOT NULL DEFAULT '',
    body          bytea,
    etag          text NOT NULL DEFAULT '',
    problem       text NOT NULL DEFAULT '',
    fetched_at    timestamptz NOT NULL,
    next_fetch_at timestamptz NOT NULL
);
