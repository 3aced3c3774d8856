-- Time triggers: one row per time trigger of a workflow's active version,
-- kept in step with the definition store in the same transactions, and
-- fired by the scheduler (engine/trigger, engine/scheduler). See
-- docs/triggers.md.

-- +goose Up
CREATE TABLE time_trigger (
    workflow_id      text COLLATE "C" NOT NULL REFERENCES workflow (workflow_id) ON DELETE CASCADE,
    -- Position of the trigger in the active version's time_triggers.
    trigger_index    integer     NOT NULL,
    workflow_version bigint      NOT NULL,
    -- Maestro's toString of the trigger: request ids and the fuzzy delay
    -- derive from it, and a trigger keeps its schedule across versions
    -- that keep it unchanged.
    trigger_key      text        NOT NULL,
    -- Maestro's time trigger uuid of the version (one for all its time
    -- triggers); TIME initiators carry it.
    trigger_uuid     uuid        NOT NULL,
    definition       jsonb       NOT NULL,
    timezone         text        NOT NULL,
    -- ACTIVE (fires), DISABLED (properties.time_trigger_disabled),
    -- EXHAUSTED (no fire time left) or INVALID (the stored definition no
    -- longer compiles; error says why).
    state            text        NOT NULL,
    error            text,
    delay_seconds    integer     NOT NULL DEFAULT 0,
    -- The next scheduled time, and when it is due: plus the fuzzy delay.
    next_schedule_at timestamptz,
    next_fire_at     timestamptz,
    -- The last fire time that started a run, that run, and when.
    last_fire_at     timestamptz,
    last_instance_id bigint,
    last_fired_at    timestamptz,
    -- Fire times skipped by the missed-fire policy.
    missed_fires     bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, trigger_index),
    CHECK (state IN ('ACTIVE', 'DISABLED', 'EXHAUSTED', 'INVALID')),
    CHECK ((state = 'ACTIVE') = (next_fire_at IS NOT NULL))
);
-- The scheduler claims due triggers, earliest first.
CREATE INDEX time_trigger_due_idx ON time_trigger (next_fire_at) WHERE state = 'ACTIVE';

-- Workflows whose trigger rows the scheduler must rebuild: every workflow
-- that had an active version with time triggers before this table existed.
CREATE TABLE time_trigger_pending (
    workflow_id text COLLATE "C" PRIMARY KEY REFERENCES workflow (workflow_id) ON DELETE CASCADE
);
INSERT INTO time_trigger_pending (workflow_id)
SELECT w.workflow_id FROM workflow w
JOIN workflow_version v ON v.workflow_id = w.workflow_id AND v.version = w.active_version
WHERE jsonb_array_length(coalesce(v.definition->'time_triggers', '[]'::jsonb)) > 0;

-- +goose Down
DROP TABLE time_trigger_pending;
DROP TABLE time_trigger;
