-- Who did what: the caller of every change is recorded (docs/security.md).
-- Versions, properties snapshots, workflow timeline events, breakpoints
-- and tag permits already name their author; these columns record the
-- callers of the remaining actions.

-- +goose Up

-- The caller who resumed a paused step attempt.
ALTER TABLE step_paused ADD COLUMN resumed_by text;
-- The caller who last changed a tag permit's limit.
ALTER TABLE tag_permit ADD COLUMN modified_by text;

-- +goose Down
ALTER TABLE tag_permit DROP COLUMN modified_by;
ALTER TABLE step_paused DROP COLUMN resumed_by;
