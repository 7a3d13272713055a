DROP TABLE catalog.key_canary;
