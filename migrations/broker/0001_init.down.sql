DROP TABLE broker.operations;
DROP TABLE broker.bindings;
DROP TABLE broker.instances;
DROP TABLE broker.catalog;
