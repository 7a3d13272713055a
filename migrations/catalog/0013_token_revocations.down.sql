DROP TRIGGER api_tokens_truncated ON catalog.api_tokens;
DROP TRIGGER api_tokens_removed ON catalog.api_tokens;
DROP FUNCTION catalog.announce_token_removal();
