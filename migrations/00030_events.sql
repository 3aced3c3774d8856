-- Events and alerts: the transactional outbox of Maestro's events, the
-- cursors of the services that read it, and the alerting state. See
-- docs/events.md.

-- +goose Up

-- Every status change of a run or a step, every definition change and every
-- alert is one row, written in the same statement or transaction as the
-- change it reports: a crash can neither lose an event nor keep one for a
-- change that rolled back. tx is the writing transaction's id. Readers
-- (the forwarders to the sinks, the alerting service, the event feed) walk
-- the table in (tx, event_id) order and only below the oldest transaction
-- still running (pg_snapshot_xmin), so a row committed late can never
-- appear behind a position a reader has passed. Rows stay for a retention
-- window and until every cursor has passed them.
CREATE TABLE maestro_event (
    tx          xid8        NOT NULL DEFAULT pg_current_xact_id(),
    -- Cached per session: ids need only be unique and, within one
    -- transaction (one session), increasing.
    event_id    bigint      GENERATED ALWAYS AS IDENTITY (CACHE 64),
    -- 1 step status, 2 instance status, 3 definition, 4 version,
    -- 5 properties, 6 activation, 7 deactivation, 8 deletion, 9 alert
    -- (engine/event kind.go).
    kind        smallint    NOT NULL,
    workflow_id text        COLLATE "C" NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- The run's or step attempt's seq after the write, for status changes.
    seq         bigint,
    -- The event: for status changes a compact form (short keys, without
    -- what the columns hold), else as Maestro publishes it without
    -- event_id, cluster_name and send_time. json, not jsonb: it is written
    -- on every step write and never queried by its contents, so it is kept
    -- as text rather than converted.
    payload     json        NOT NULL,
    PRIMARY KEY (tx, event_id)
);

-- Where each reader of maestro_event is: the last (tx, event_id) it has
-- handled. One row per reader ('sqs', 'local', 'webhook', 'alerting').
CREATE TABLE maestro_event_cursor (
    name       text        PRIMARY KEY,
    tx         xid8        NOT NULL DEFAULT '0',
    event_id   bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Maestro's correlation id: a root run's is workflow_id:instance_id:run_id
-- (NULL here, computed on read); a child run (subworkflow, foreach and
-- while iterations) carries its root's.
ALTER TABLE workflow_instance ADD COLUMN correlation_id text;

-- Maestro's internal id of a workflow: tells a workflow from an earlier
-- one of the same id in deletion events.
ALTER TABLE workflow ADD COLUMN internal_id bigint GENERATED ALWAYS AS IDENTITY;

-- One row per alert sent: the key (the run's uuid and the alert type, for
-- run alerts) makes a second alert of a run and type a no-op.
CREATE TABLE maestro_alert (
    alert_key   text        PRIMARY KEY,
    workflow_id text        COLLATE "C" NOT NULL,
    alert_type  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX maestro_alert_created_idx ON maestro_alert (created_at);

-- Alerts that fire on time rather than on an event: a run's TCT, a run
-- running long, a step waiting long for its signals, a workflow without a
-- success for too long (instance_id and run_id 0).
CREATE TABLE maestro_alert_timer (
    workflow_id text        COLLATE "C" NOT NULL,
    instance_id bigint      NOT NULL,
    run_id      bigint      NOT NULL,
    alert_type  text        NOT NULL,
    step_id     text        NOT NULL DEFAULT '',
    attempt_id  bigint      NOT NULL DEFAULT 0,
    due_at      timestamptz NOT NULL,
    details     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (workflow_id, instance_id, run_id, alert_type, step_id, attempt_id)
);
CREATE INDEX maestro_alert_timer_due_idx ON maestro_alert_timer (due_at);

-- +goose Down
DROP TABLE maestro_alert_timer;
DROP TABLE maestro_alert;
ALTER TABLE workflow DROP COLUMN internal_id;
ALTER TABLE workflow_instance DROP COLUMN correlation_id;
DROP TABLE maestro_event_cursor;
DROP TABLE maestro_event;
