-- Subworkflow steps: a child run records the parent step that created it.
-- See docs/subworkflow.md.

-- +goose Up

-- parent: {"workflow_id", "instance_id", "run_id", "step_id", "attempt_id",
-- "group_id"} of the step attempt that created the run; NULL for a run
-- started any other way. parent_key is the same identity as one string:
-- unique, so a step attempt creates at most one child however often its
-- start is repeated. depth counts the subworkflow steps above the run.
ALTER TABLE workflow_instance ADD COLUMN parent jsonb;
ALTER TABLE workflow_instance ADD COLUMN parent_key text;
ALTER TABLE workflow_instance ADD COLUMN depth integer NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX workflow_instance_parent_idx ON workflow_instance (parent_key)
    WHERE parent_key IS NOT NULL;

-- +goose Down
DROP INDEX workflow_instance_parent_idx;
ALTER TABLE workflow_instance DROP COLUMN depth;
ALTER TABLE workflow_instance DROP COLUMN parent_key;
ALTER TABLE workflow_instance DROP COLUMN parent;
