-- Day-two operations (maestro ops, docs/operations-runbooks.md): draining
-- an engine node, a maintenance window that pauses every trigger, and the
-- audit log of what operators did. Expand-only: the release before this
-- one never reads these columns and tables.

-- +goose Up
-- A node an operator drains gives its flow groups up (cleanly, as on
-- SIGTERM) and claims none while the flag is set; the other nodes share
-- the groups out without it (engine/membership). The flag lives with the
-- node's membership row: a clean stop deletes the row, so a node started
-- again (ECS starts a new task, with a new id) is not drained.
ALTER TABLE engine_node ADD COLUMN draining boolean NOT NULL DEFAULT false;

-- One row: the deployment's maintenance switches. While triggers_paused is
-- set the time-trigger scheduler fires nothing (due fire times wait and
-- follow the missed-fire policy on resume) and signals start no triggered
-- runs (they are kept and matched on resume).
CREATE TABLE maintenance (
    id              smallint    PRIMARY KEY CHECK (id = 1),
    triggers_paused boolean     NOT NULL DEFAULT false,
    paused_by       text,
    reason          text,
    paused_at       timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
INSERT INTO maintenance (id) VALUES (1);

-- Signals that arrived while triggers were paused: stored, and the steps
-- waiting for them woken as usual, but not yet matched against signal
-- triggers. The engine's signal sweep matches them once triggers resume.
CREATE TABLE signal_trigger_deferred (
    seq         bigint      PRIMARY KEY REFERENCES signal_instance (seq) ON DELETE CASCADE,
    create_time timestamptz NOT NULL DEFAULT now()
);

-- What operators did through maestro ops, one row each (the command, who
-- ran it, what it touched, its outcome); each also raises an ALERT event
-- of alert_type OPERATOR_ACTION in the event outbox.
CREATE TABLE operator_action (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action      text        NOT NULL,
    actor       text        NOT NULL,
    target      text        NOT NULL DEFAULT '',
    detail      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    create_time timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operator_action_time_idx ON operator_action (create_time);

-- +goose Down
DROP TABLE operator_action;
DROP TABLE signal_trigger_deferred;
DROP TABLE maintenance;
ALTER TABLE engine_node DROP COLUMN draining;
