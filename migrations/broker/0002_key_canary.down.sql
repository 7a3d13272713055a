DROP TABLE broker.key_canary;
