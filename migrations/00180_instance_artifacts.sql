-- The artifacts a start request gives a run (Maestro's
-- WorkflowStartRequest.artifacts, kept as the run's
-- WorkflowInstance.artifacts): a JSON object of artifacts by name, NULL
-- when the start gave none. Written in the start's transaction.

-- +goose Up
ALTER TABLE workflow_instance ADD COLUMN artifacts jsonb;

-- +goose Down
ALTER TABLE workflow_instance DROP COLUMN artifacts;
