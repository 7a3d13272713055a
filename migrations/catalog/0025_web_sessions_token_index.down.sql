DROP INDEX catalog.web_sessions_token_idx;
