-- Managed backfills (engine/backfill, engine/trigger/backfill; see
-- docs/backfill.md): a backfill runs one workflow version over a list of
-- partition values, and each value's run is linked to its partition in the
-- transaction that creates the run.

-- +goose Up
CREATE TABLE backfill (
    backfill_id      text COLLATE "C" PRIMARY KEY,
    workflow_id      text COLLATE "C" NOT NULL REFERENCES workflow (workflow_id) ON DELETE CASCADE,
    workflow_version bigint      NOT NULL,
    -- The partition parameter, its type (LONG or STRING) and the format of
    -- its values (YYYYMMDD, YYYY-MM-DD, YYYYMMDDHH, LONG, STRING).
    param            text        NOT NULL,
    param_type       text        NOT NULL,
    format           text        NOT NULL,
    -- The request as given: from, to, interval or values, order.
    spec             jsonb       NOT NULL,
    concurrency      integer     NOT NULL CHECK (concurrency > 0),
    downstream       boolean     NOT NULL,
    rerun            boolean     NOT NULL,
    -- RUNNING, PAUSED, SUCCEEDED, FAILED, CANCELLED.
    status           text        NOT NULL,
    request_id       text,
    created_by       text        NOT NULL DEFAULT '',
    partition_count  integer     NOT NULL,
    create_time      timestamptz NOT NULL DEFAULT now(),
    modify_time      timestamptz NOT NULL DEFAULT now(),
    end_time         timestamptz,
    CHECK (status IN ('RUNNING', 'PAUSED', 'SUCCEEDED', 'FAILED', 'CANCELLED'))
);
CREATE UNIQUE INDEX backfill_request_idx ON backfill (workflow_id, request_id) WHERE request_id IS NOT NULL;
CREATE INDEX backfill_workflow_idx ON backfill (workflow_id, create_time DESC);
-- The driver's work list.
CREATE INDEX backfill_running_idx ON backfill (modify_time) WHERE status = 'RUNNING';

CREATE TABLE backfill_partition (
    backfill_id text COLLATE "C" NOT NULL REFERENCES backfill (backfill_id) ON DELETE CASCADE,
    -- Position in the backfill's order (0 first).
    seq         integer     NOT NULL,
    value       text        NOT NULL,
    -- PENDING, RUNNING (linked to a run not ended), SUCCEEDED, FAILED,
    -- STOPPED, SKIPPED (a SUCCEEDED run of the version had the value),
    -- CANCELLED (never started; the backfill was cancelled).
    state       text        NOT NULL,
    -- The run of the value: the backfill's, or the succeeded run it skipped
    -- for.
    instance_id bigint,
    -- Retries of the partition (the retry action); part of its runs'
    -- request ids.
    attempt     integer     NOT NULL DEFAULT 0,
    modify_time timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (backfill_id, seq),
    CHECK (state IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'STOPPED', 'SKIPPED', 'CANCELLED'))
);
CREATE INDEX backfill_partition_live_idx ON backfill_partition (backfill_id, seq) WHERE state IN ('PENDING', 'RUNNING');

-- Runs a backfill caused (its own and, with downstream, those its runs'
-- signals started) carry its id in their initiator.
CREATE INDEX workflow_instance_backfill_idx ON workflow_instance ((initiator->>'backfill_id'), workflow_id)
    WHERE initiator ? 'backfill_id';

-- +goose Down
DROP INDEX workflow_instance_backfill_idx;
DROP TABLE backfill_partition;
DROP TABLE backfill;
