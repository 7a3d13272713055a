-- A removed API token (revoked, or pruned after it expired) is announced on
-- the channel bindery_tokens, however it was removed: processes that keep
-- the tokens they checked forget them when told, so a revoked token stops
-- working on every replica at once.
CREATE FUNCTION catalog.announce_token_removal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('bindery_tokens', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER api_tokens_removed AFTER DELETE OR UPDATE OR TRUNCATE ON catalog.api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION catalog.announce_token_removal();
