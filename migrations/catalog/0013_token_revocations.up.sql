-- A removed API token (revoked, or pruned after it expired) or a changed
-- one is announced on the channel bindery_tokens, however it was changed:
-- processes that keep the tokens they checked forget them when told, so a
-- revoked token stops working on every replica at once. Row by row, so a
-- statement that removes nothing (a prune with nothing to prune) says
-- nothing; PostgreSQL sends one notification per transaction.
CREATE FUNCTION catalog.announce_token_removal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('bindery_tokens', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER api_tokens_removed AFTER DELETE OR UPDATE ON catalog.api_tokens
    FOR EACH ROW EXECUTE FUNCTION catalog.announce_token_removal();
CREATE TRIGGER api_tokens_truncated AFTER TRUNCATE ON catalog.api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION catalog.announce_token_removal();
