-- Signals and step signal dependencies. See docs/signals.md.
-- (00007 is reserved for another change; goose accepts the gap.)

-- +goose Up

-- Every announced signal. seq orders the signals (Maestro's seq_id);
-- request_id makes an announcement idempotent per name.
CREATE TABLE signal_instance (
    seq         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text        NOT NULL,
    params      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    payload     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    request_id  text,
    create_time timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX signal_instance_request_idx ON signal_instance (name, request_id)
    WHERE request_id IS NOT NULL;
-- Matching and "latest" read the signals of one name, newest first.
CREATE INDEX signal_instance_name_idx ON signal_instance (name, seq DESC);

-- One row per step attempt that has signal dependencies: which signal
-- names it waits for and which flow group owns it (so an arriving signal
-- can wake it through the outbox), when it began waiting (its timeout
-- clock survives a restart), who bypassed its dependencies, and the
-- signals that satisfied them.
CREATE TABLE step_signal_wait (
    workflow_id  text        NOT NULL,
    instance_id  bigint      NOT NULL,
    run_id       bigint      NOT NULL,
    step_id      text        NOT NULL,
    attempt_id   bigint      NOT NULL,
    group_id     integer     NOT NULL,
    signal_names text[]      NOT NULL,
    matched      jsonb,
    bypassed_by  text,
    bypass_time  timestamptz,
    create_time  timestamptz NOT NULL DEFAULT now(),
    done_time    timestamptz,
    PRIMARY KEY (workflow_id, instance_id, run_id, step_id, attempt_id),
    FOREIGN KEY (workflow_id, instance_id, run_id)
        REFERENCES workflow_instance (workflow_id, instance_id, run_id) ON DELETE CASCADE
);
-- An arriving signal looks up the attempts still waiting for its name.
CREATE INDEX step_signal_wait_names_idx ON step_signal_wait USING gin (signal_names)
    WHERE done_time IS NULL;

-- +goose Down
DROP TABLE step_signal_wait;
DROP TABLE signal_instance;
