-- Incremental processing (engine/incremental, docs/incremental.md): a
-- signal trigger with "incremental": true keeps a watermark per (workflow,
-- table), the changes it received, and the range each of its runs covers.

-- +goose Up
CREATE TABLE incremental_watermark (
    workflow_id           text COLLATE "C" NOT NULL REFERENCES workflow (workflow_id) ON DELETE CASCADE,
    -- The table (tablechange.TableRef.String()).
    table_ref             text COLLATE "C" NOT NULL,
    -- The trigger that received the table's last change (its runs'
    -- initiator trigger_uuid); "" for a watermark set by hand.
    trigger_uuid          text        NOT NULL DEFAULT '',
    -- The watermark: the last snapshot a SUCCEEDED run covered (0: none).
    snapshot_id           bigint      NOT NULL DEFAULT 0,
    commit_time           bigint      NOT NULL DEFAULT 0,
    -- The end of the last range a run was started for.
    attempted_snapshot_id bigint      NOT NULL DEFAULT 0,
    attempted_commit_time bigint      NOT NULL DEFAULT 0,
    -- The newest change received (by commit time, then snapshot id).
    latest_snapshot_id    bigint      NOT NULL DEFAULT 0,
    latest_commit_time    bigint      NOT NULL DEFAULT 0,
    -- The run in flight (at most one), NULL when none.
    inflight_instance_id  bigint,
    -- Runs started for the table: part of their request ids.
    runs_started          bigint      NOT NULL DEFAULT 0,
    modify_time           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, table_ref)
);
-- The sweep's work lists: tables with changes beyond the last range and no
-- run in flight, and the runs in flight.
CREATE INDEX incremental_watermark_due_idx ON incremental_watermark (modify_time)
    WHERE inflight_instance_id IS NULL
      AND (latest_commit_time, latest_snapshot_id) > (attempted_commit_time, attempted_snapshot_id);
CREATE INDEX incremental_watermark_inflight_idx ON incremental_watermark (workflow_id, inflight_instance_id)
    WHERE inflight_instance_id IS NOT NULL;

-- The changes a watermark received, one row per snapshot (a redelivered
-- change is the same row).
CREATE TABLE incremental_change (
    workflow_id        text COLLATE "C" NOT NULL,
    table_ref          text COLLATE "C" NOT NULL,
    snapshot_id        bigint      NOT NULL,
    parent_snapshot_id bigint      NOT NULL DEFAULT 0,
    commit_time        bigint      NOT NULL,
    operation          text        NOT NULL,
    -- The signal instance that announced it (0 for none).
    signal_seq         bigint      NOT NULL DEFAULT 0,
    receive_time       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, table_ref, snapshot_id),
    FOREIGN KEY (workflow_id, table_ref) REFERENCES incremental_watermark (workflow_id, table_ref) ON DELETE CASCADE,
    CHECK (operation IN ('append', 'overwrite', 'delete', 'replace'))
);
CREATE INDEX incremental_change_order_idx ON incremental_change (workflow_id, table_ref, commit_time, snapshot_id);

-- The range each incremental run covers, written with the run.
CREATE TABLE incremental_run (
    workflow_id      text COLLATE "C" NOT NULL,
    instance_id      bigint      NOT NULL,
    table_ref        text COLLATE "C" NOT NULL,
    from_snapshot_id bigint      NOT NULL,
    to_snapshot_id   bigint      NOT NULL,
    from_commit_time bigint      NOT NULL,
    to_commit_time   bigint      NOT NULL,
    snapshot_count   bigint      NOT NULL,
    has_overwrite    boolean     NOT NULL,
    has_delete       boolean     NOT NULL,
    -- The backfill that started it, "" for the trigger.
    backfill_id      text        NOT NULL DEFAULT '',
    -- RUNNING until the run ends, then its terminal status; ADVANCED when
    -- it SUCCEEDED and moved the watermark.
    state            text        NOT NULL DEFAULT 'RUNNING',
    create_time      timestamptz NOT NULL DEFAULT now(),
    end_time         timestamptz,
    PRIMARY KEY (workflow_id, instance_id),
    FOREIGN KEY (workflow_id, table_ref) REFERENCES incremental_watermark (workflow_id, table_ref) ON DELETE CASCADE
);
CREATE INDEX incremental_run_table_idx ON incremental_run (workflow_id, table_ref, instance_id DESC);

-- +goose Down
DROP TABLE incremental_run;
DROP TABLE incremental_change;
DROP TABLE incremental_watermark;
