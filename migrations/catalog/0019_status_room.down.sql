ALTER TABLE catalog.bindings RESET (fillfactor);
ALTER TABLE catalog.instances RESET (fillfactor);
