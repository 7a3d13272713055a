DROP TABLE catalog.web_sessions;
