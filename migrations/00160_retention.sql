-- Retention and archival (docs/operations.md, "Retention and archival"):
-- terminal runs older than their retention are written to the archive
-- (S3, or a directory locally) with their steps, timelines, signals and
-- lineage, then deleted here in small batches (engine/retention).

-- +goose Up

-- The archiver's candidates, oldest first: terminal runs by end time. The
-- predicate is the terminal statuses, so the engine's live runs (the hot
-- rows) never enter this index and its upkeep costs the engine one index
-- insert per run, when the run ends.
CREATE INDEX workflow_instance_ended_idx ON workflow_instance (end_time)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT');

-- Where each archived run is: one small row per run, written in the
-- transaction that deletes the run, so that GET of an archived run finds
-- its object without listing the archive. object_key names the
-- gzip-compressed JSON-lines object holding the run (one line per run).
CREATE TABLE run_archive (
    workflow_id text        COLLATE "C" NOT NULL,
    instance_id bigint      NOT NULL,
    run_id      bigint      NOT NULL,
    uuid        uuid        NOT NULL,
    status      text        NOT NULL,
    end_time    timestamptz NOT NULL,
    step_count  integer     NOT NULL DEFAULT 0,
    object_key  text        NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, instance_id, run_id)
);

-- Deleting a run's step rows cascades to these tables through foreign keys
-- on the step's identity; without an index on the referencing columns each
-- deleted step row costs a scan of the whole table.
CREATE INDEX step_output_data_step_idx ON step_output_data (workflow_id, instance_id, run_id, step_id, attempt_id);
CREATE INDEX step_completion_step_idx ON step_completion (workflow_id, instance_id, run_id, step_id, attempt_id);
CREATE INDEX tag_permit_held_step_idx ON tag_permit_held (workflow_id, instance_id, run_id, step_id, attempt_id);

-- Table bloat. The engine updates every step row several times (CREATED,
-- RUNNING, an end status) and the archiver deletes whole runs: dead tuples
-- pile up in the tables the hot path reads. PostgreSQL's defaults vacuum a
-- table when 20% of it is dead, which for 10 million step rows is 2 million
-- dead tuples before the first vacuum. Vacuum these tables after 1-2% (plus
-- a floor), analyze them sooner, and let autovacuum work faster on them
-- (the cost limit), so that space freed by archival is reused by new rows
-- instead of growing the files. fillfactor 90 leaves room on each page of
-- the step and run tables so that status updates stay HOT (no index
-- writes); it applies to pages written from now on.
ALTER TABLE step_instance SET (
    fillfactor = 90,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_vacuum_cost_limit = 2000
);
ALTER TABLE workflow_instance SET (
    fillfactor = 90,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_limit = 2000
);
ALTER TABLE signal_lineage SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);
ALTER TABLE step_signal_wait SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);
ALTER TABLE maestro_event SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_cost_limit = 2000
);

-- The app role (the engine, the functions) archives: it reads and deletes
-- the rows above and writes run_archive. The default privileges of 00100
-- grant the new table; granting it again here keeps a database whose
-- migrations ran as another role right.
GRANT SELECT, INSERT, UPDATE, DELETE ON run_archive TO maestro_app;

-- +goose Down
ALTER TABLE maestro_event RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_limit);
ALTER TABLE step_signal_wait RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE signal_lineage RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE workflow_instance RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_limit);
ALTER TABLE step_instance RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_cost_limit);
DROP INDEX tag_permit_held_step_idx;
DROP INDEX step_completion_step_idx;
DROP INDEX step_output_data_step_idx;
DROP TABLE run_archive;
DROP INDEX workflow_instance_ended_idx;
