-- Signal triggers, output signals and signal lineage (engine/signal,
-- engine/trigger, engine/signalbroker). See docs/signals.md.

-- +goose Up

-- Maestro's signal instance id: the request id when the announcement gave
-- one, else a uuid of the signal's name and params, so that announcing the
-- same signal twice is one instance. Rows announced before had no such
-- dedup; each keeps an id of its own.
ALTER TABLE signal_instance ADD COLUMN instance_id text;
ALTER TABLE signal_instance ADD COLUMN request_time timestamptz;
UPDATE signal_instance SET instance_id = coalesce(request_id, 'legacy-seq-' || seq), request_time = create_time;
ALTER TABLE signal_instance ALTER COLUMN instance_id SET NOT NULL;
ALTER TABLE signal_instance ALTER COLUMN request_time SET NOT NULL;
ALTER TABLE signal_instance ALTER COLUMN request_time SET DEFAULT now();
CREATE UNIQUE INDEX signal_instance_dedup_idx ON signal_instance (name, instance_id);
DROP INDEX signal_instance_request_idx;

-- One row per signal trigger of a workflow's active version, kept in step
-- with the definition store in the same transactions (engine/trigger,
-- SyncSignals). trigger_uuid derives from the trigger's definition, so a
-- version that keeps a trigger unchanged keeps its row and what it waits
-- for.
CREATE TABLE signal_trigger (
    workflow_id      text COLLATE "C" NOT NULL REFERENCES workflow (workflow_id) ON DELETE CASCADE,
    trigger_uuid     uuid        NOT NULL,
    -- Position of the trigger in the active version's signal_triggers.
    trigger_index    integer     NOT NULL,
    workflow_version bigint      NOT NULL,
    definition       jsonb       NOT NULL,
    -- The signal names of its definitions, sorted.
    signal_names     text[]      NOT NULL,
    -- ACTIVE (subscribed) or DISABLED (properties.signal_trigger_disabled).
    state            text        NOT NULL,
    -- Satisfying sets of signal instances found, runs they started, and the
    -- last of them.
    match_count      bigint      NOT NULL DEFAULT 0,
    start_count      bigint      NOT NULL DEFAULT 0,
    last_matched_at  timestamptz,
    last_signal_ids  jsonb,
    last_instance_id bigint,
    -- Why the last satisfying set started no run (condition false or not
    -- evaluable, params not evaluable, start refused), or null.
    error            text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, trigger_uuid),
    CHECK (state IN ('ACTIVE', 'DISABLED'))
);

-- The subscriptions of ACTIVE triggers, keyed by signal name: an arriving
-- signal reads only the triggers that name it.
CREATE TABLE signal_subscription (
    signal_name  text             NOT NULL,
    workflow_id  text COLLATE "C" NOT NULL,
    trigger_uuid uuid             NOT NULL,
    PRIMARY KEY (signal_name, workflow_id, trigger_uuid),
    FOREIGN KEY (workflow_id, trigger_uuid) REFERENCES signal_trigger (workflow_id, trigger_uuid) ON DELETE CASCADE
);
CREATE INDEX signal_subscription_trigger_idx ON signal_subscription (workflow_id, trigger_uuid);

-- Signal instances that satisfy one definition of a multi-signal trigger
-- and wait for the other definitions' signals with the same join key
-- values (join_key encodes them). A satisfying set consumes one row per
-- other signal name, the oldest, in the transaction that starts its run.
CREATE TABLE signal_trigger_pending (
    workflow_id  text COLLATE "C" NOT NULL,
    trigger_uuid uuid             NOT NULL,
    join_key     text             NOT NULL,
    signal_name  text             NOT NULL,
    seq          bigint           NOT NULL,
    create_time  timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, trigger_uuid, join_key, signal_name, seq),
    FOREIGN KEY (workflow_id, trigger_uuid) REFERENCES signal_trigger (workflow_id, trigger_uuid) ON DELETE CASCADE
);

-- Signals stored without having been matched yet: a step's output
-- signals, written with its terminal state. The engine's signal broker
-- matches them after that commit and deletes the row in the transaction
-- that does; its sweep catches up with rows a crash left.
CREATE TABLE signal_pending (
    seq         bigint      PRIMARY KEY REFERENCES signal_instance (seq) ON DELETE CASCADE,
    name        text        NOT NULL,
    create_time timestamptz NOT NULL DEFAULT now()
);

-- Lineage: the step attempt that produced a signal (PRODUCED), the runs a
-- signal started through a trigger (STARTED) and the step attempts whose
-- dependencies it met (UNBLOCKED). position is the output's index for
-- PRODUCED and the dependency's for UNBLOCKED.
CREATE TABLE signal_lineage (
    seq          bigint           NOT NULL REFERENCES signal_instance (seq) ON DELETE CASCADE,
    signal_name  text             NOT NULL,
    kind         text             NOT NULL,
    workflow_id  text COLLATE "C" NOT NULL,
    instance_id  bigint           NOT NULL,
    run_id       bigint           NOT NULL,
    step_id      text             NOT NULL DEFAULT '',
    attempt_id   bigint           NOT NULL DEFAULT 0,
    position     integer          NOT NULL DEFAULT 0,
    trigger_uuid uuid,
    create_time  timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (seq, kind, workflow_id, instance_id, run_id, step_id, attempt_id, position),
    FOREIGN KEY (workflow_id, instance_id, run_id) REFERENCES workflow_instance (workflow_id, instance_id, run_id) ON DELETE CASCADE,
    CHECK (kind IN ('PRODUCED', 'STARTED', 'UNBLOCKED'))
);
CREATE INDEX signal_lineage_run_idx ON signal_lineage (workflow_id, instance_id, run_id, step_id, attempt_id);

-- Workflows whose active version has signal triggers get their rows from
-- the scheduler's pending sync (time_trigger_pending syncs both kinds).
INSERT INTO time_trigger_pending (workflow_id)
SELECT w.workflow_id FROM workflow w
JOIN workflow_version v ON v.workflow_id = w.workflow_id AND v.version = w.active_version
WHERE jsonb_array_length(coalesce(v.definition->'signal_triggers', '[]'::jsonb)) > 0
ON CONFLICT DO NOTHING;

-- +goose Down
DROP TABLE signal_lineage;
DROP TABLE signal_pending;
DROP TABLE signal_trigger_pending;
DROP TABLE signal_subscription;
DROP TABLE signal_trigger;
CREATE UNIQUE INDEX signal_instance_request_idx ON signal_instance (name, request_id) WHERE request_id IS NOT NULL;
DROP INDEX signal_instance_dedup_idx;
ALTER TABLE signal_instance DROP COLUMN request_time;
ALTER TABLE signal_instance DROP COLUMN instance_id;
