-- The Kubernetes API looks up an object's state at a revision (watches
-- resuming with a selector) and prunes the feed by age.
CREATE INDEX changes_object_idx ON catalog.changes (object_id, revision);
CREATE INDEX changes_created_idx ON catalog.changes (created_at);
