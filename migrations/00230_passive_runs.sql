-- Passivated runs (docs/engine.md, "Passivation"): a run whose every live
-- step waits (on a timer, a signal, a breakpoint or an external completion)
-- longer than the engine's threshold leaves the engine's memory. The
-- database holds it, and passive_wake_at says when it is due at the latest
-- (its earliest timer, or a fallback recheck): a takeover enumerates such
-- runs into its wake index with the columns of the key alone, instead of
-- rebuilding each one. NULL for a run held in memory. The engine sets it,
-- fenced by the run's generation, as the run leaves memory, and clears it
-- (stamping its generation) as it brings the run back.

-- +goose Up
ALTER TABLE workflow_instance ADD COLUMN passive_wake_at timestamptz;
-- A takeover enumerates a group's passivated runs, a page at a time in key
-- order ...
CREATE INDEX workflow_instance_passive_idx ON workflow_instance (group_id, workflow_id, instance_id, run_id)
    INCLUDE (passive_wake_at)
    WHERE passive_wake_at IS NOT NULL AND status IN ('IN_PROGRESS', 'PAUSED');
-- ... and adoption and reconciliation rebuild the others, without
-- visiting the passivated ones.
CREATE INDEX workflow_instance_in_memory_idx ON workflow_instance (group_id)
    WHERE passive_wake_at IS NULL AND status IN ('IN_PROGRESS', 'PAUSED');

-- +goose Down
DROP INDEX workflow_instance_in_memory_idx;
DROP INDEX workflow_instance_passive_idx;
ALTER TABLE workflow_instance DROP COLUMN passive_wake_at;
