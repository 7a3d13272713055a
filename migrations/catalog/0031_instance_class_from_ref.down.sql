-- Nothing to undo: the rows 0031 put right are what the release before it
-- writes for an instance whose plan stayed in its class, and it reads them
-- as they are.
SELECT;
