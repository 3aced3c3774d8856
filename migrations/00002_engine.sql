-- The flow engine: flow groups, workflow and step instances, and the
-- transactional outbox queue. See docs/engine.md.

-- +goose Up

-- A flow group is the unit of ownership. A node claims a group by bumping
-- its generation; every write the node makes for a flow of the group is
-- fenced by that generation (copied onto each workflow_instance row).
CREATE TABLE flow_group (
    group_id     integer     PRIMARY KEY,
    owner        text,
    generation   bigint      NOT NULL DEFAULT 0,
    heartbeat_at timestamptz,
    expires_at   timestamptz
);

-- Instance ids are allocated per workflow.
ALTER TABLE workflow ADD COLUMN latest_instance_id bigint NOT NULL DEFAULT 0;

CREATE TABLE workflow_instance (
    workflow_id      text        NOT NULL,
    instance_id      bigint      NOT NULL,
    run_id           bigint      NOT NULL,
    workflow_version bigint      NOT NULL,
    uuid             uuid        NOT NULL,
    request_id       text,
    group_count      integer     NOT NULL,
    group_id         integer     NOT NULL,
    generation       bigint      NOT NULL DEFAULT 0,
    status           text        NOT NULL,
    -- Bumped on every write; guards against lost updates.
    seq              bigint      NOT NULL DEFAULT 0,
    definition       jsonb       NOT NULL,
    run_params       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    params           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    initiator        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    timeline         jsonb       NOT NULL DEFAULT '[]'::jsonb,
    runtime_overview jsonb       NOT NULL DEFAULT '{}'::jsonb,
    timeout_seconds  bigint      NOT NULL,
    create_time      timestamptz NOT NULL DEFAULT now(),
    start_time       timestamptz,
    end_time         timestamptz,
    modify_time      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, instance_id, run_id)
);
CREATE UNIQUE INDEX workflow_instance_request_idx ON workflow_instance (workflow_id, request_id)
    WHERE request_id IS NOT NULL AND run_id = 1;
CREATE UNIQUE INDEX workflow_instance_uuid_idx ON workflow_instance (uuid);
-- Reconciliation loads the live flows of a group.
CREATE INDEX workflow_instance_live_idx ON workflow_instance (group_id)
    WHERE status IN ('CREATED', 'IN_PROGRESS', 'PAUSED');

CREATE TABLE step_instance (
    workflow_id   text        NOT NULL,
    instance_id   bigint      NOT NULL,
    run_id        bigint      NOT NULL,
    step_id       text        NOT NULL,
    attempt_id    bigint      NOT NULL,
    uuid          uuid        NOT NULL,
    status        text        NOT NULL,
    seq           bigint      NOT NULL DEFAULT 0,
    step_type     text        NOT NULL,
    params        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    outputs       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    runtime_state jsonb       NOT NULL DEFAULT '{}'::jsonb,
    retry         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    timeline      jsonb       NOT NULL DEFAULT '[]'::jsonb,
    create_time   timestamptz NOT NULL DEFAULT now(),
    start_time    timestamptz,
    end_time      timestamptz,
    modify_time   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, instance_id, run_id, step_id, attempt_id),
    FOREIGN KEY (workflow_id, instance_id, run_id)
        REFERENCES workflow_instance (workflow_id, instance_id, run_id) ON DELETE CASCADE
);

-- State never rolls back, whoever writes: a terminal step or instance keeps
-- its status, and seq only grows. The engine checks the transition table in
-- memory too; this is the last line of defence against a stale writer.
-- +goose StatementBegin
CREATE FUNCTION maestro_guard_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.seq <= OLD.seq THEN
        RAISE EXCEPTION 'stale write to %: seq % is not after %', TG_TABLE_NAME, NEW.seq, OLD.seq
            USING ERRCODE = 'serialization_failure';
    END IF;
    IF OLD.status IS DISTINCT FROM NEW.status AND OLD.status = ANY (TG_ARGV) THEN
        RAISE EXCEPTION 'illegal transition of % from terminal status % to %', TG_TABLE_NAME, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER step_instance_guard BEFORE UPDATE ON step_instance
    FOR EACH ROW WHEN (OLD.seq IS DISTINCT FROM NEW.seq OR OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION maestro_guard_status(
        'SUCCEEDED', 'COMPLETED_WITH_ERROR', 'UNSATISFIED', 'SKIPPED', 'DISABLED',
        'FATALLY_FAILED', 'INTERNALLY_FAILED', 'STOPPED', 'TIMED_OUT',
        'USER_FAILED', 'PLATFORM_FAILED', 'TIMEOUT_FAILED');

CREATE TRIGGER workflow_instance_guard BEFORE UPDATE ON workflow_instance
    FOR EACH ROW WHEN (OLD.seq IS DISTINCT FROM NEW.seq OR OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION maestro_guard_status('SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT');

-- The transactional outbox, partitioned by queue id as in Maestro:
-- 1 start workflow, 2 instance action, 3 step update, 4 notification,
-- 5 delete workflow. Rows that target a flow carry its group id so only the
-- group's owner claims them.
CREATE TABLE maestro_queue (
    queue_id     smallint    NOT NULL,
    message_id   bigint      GENERATED ALWAYS AS IDENTITY,
    group_id     integer,
    payload      jsonb       NOT NULL,
    owned_by     text,
    owned_until  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, message_id)
) PARTITION BY LIST (queue_id);
CREATE TABLE maestro_queue_start        PARTITION OF maestro_queue FOR VALUES IN (1);
CREATE TABLE maestro_queue_action       PARTITION OF maestro_queue FOR VALUES IN (2);
CREATE TABLE maestro_queue_step_update  PARTITION OF maestro_queue FOR VALUES IN (3);
CREATE TABLE maestro_queue_notification PARTITION OF maestro_queue FOR VALUES IN (4);
CREATE TABLE maestro_queue_delete       PARTITION OF maestro_queue FOR VALUES IN (5);
CREATE INDEX maestro_queue_due_idx ON maestro_queue (group_id, owned_until);

-- +goose Down
DROP TABLE maestro_queue;
DROP TABLE step_instance;
DROP TABLE workflow_instance;
DROP FUNCTION maestro_guard_status();
ALTER TABLE workflow DROP COLUMN latest_instance_id;
DROP TABLE flow_group;
