-- Run control: run strategies (queued runs and their admission), restarts
-- and unblocking. See docs/run-control.md.

-- +goose Up

-- A queued run is CREATED and waits for admission under its workflow's run
-- strategy: it has no start message yet. Admission (under a lock on the
-- workflow row) clears the flag and enqueues the start message in the same
-- transaction. Runs created before this migration were all admitted.
ALTER TABLE workflow_instance ADD COLUMN queued boolean NOT NULL DEFAULT false;
-- A FAILED run marked unblocked no longer blocks a STRICT_SEQUENTIAL workflow.
ALTER TABLE workflow_instance ADD COLUMN unblocked boolean NOT NULL DEFAULT false;
-- How a run was started: {"policy": "START" | "RESTART_FROM_INCOMPLETE" |
-- "RESTART_FROM_BEGINNING" | "RESTART_FROM_STEP", "from_run": n, "step_id": s}.
ALTER TABLE workflow_instance ADD COLUMN run_config jsonb NOT NULL DEFAULT '{}'::jsonb;

-- Admission reads a workflow's queued runs in trigger (instance id) order.
CREATE INDEX workflow_instance_queued_idx ON workflow_instance (workflow_id, instance_id, run_id)
    WHERE queued;
-- Admission counts a workflow's admitted live runs.
CREATE INDEX workflow_instance_active_idx ON workflow_instance (workflow_id)
    WHERE status IN ('CREATED', 'IN_PROGRESS', 'PAUSED') AND NOT queued;
-- STRICT_SEQUENTIAL looks for failed runs that still block.
CREATE INDEX workflow_instance_blocking_idx ON workflow_instance (workflow_id, instance_id, run_id)
    WHERE status = 'FAILED' AND NOT unblocked;

-- +goose Down
DROP INDEX workflow_instance_blocking_idx;
DROP INDEX workflow_instance_active_idx;
DROP INDEX workflow_instance_queued_idx;
ALTER TABLE workflow_instance DROP COLUMN run_config;
ALTER TABLE workflow_instance DROP COLUMN unblocked;
ALTER TABLE workflow_instance DROP COLUMN queued;
