-- Step attempts no longer reference their run by a foreign key. The key
-- cost every attempt's insert a lookup and a lock of the run's row (a
-- KEY SHARE lock, written into the run's tuple) on the engine's hottest
-- write. What it protected holds without it: the engine inserts attempts
-- only for the live runs of flow groups it holds (fenced by the group's
-- generation, engine/flow/internal/flowstore/writer_sql.go), a workflow
-- with live runs cannot be deleted, and deleting runs deletes their
-- attempts in the same statement (engine/definition/queries.go).

-- +goose Up
ALTER TABLE step_instance DROP CONSTRAINT step_instance_workflow_id_instance_id_run_id_fkey;

-- +goose Down
DELETE FROM step_instance s WHERE NOT EXISTS (SELECT 1 FROM workflow_instance i
    WHERE i.workflow_id = s.workflow_id AND i.instance_id = s.instance_id AND i.run_id = s.run_id);
ALTER TABLE step_instance ADD CONSTRAINT step_instance_workflow_id_instance_id_run_id_fkey
    FOREIGN KEY (workflow_id, instance_id, run_id) REFERENCES workflow_instance (workflow_id, instance_id, run_id) ON DELETE CASCADE;
