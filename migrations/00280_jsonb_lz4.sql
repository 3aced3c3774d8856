-- The JSON columns of the run and step rows are compressed with lz4 rather
-- than pglz (PostgreSQL's default), from now on (docs/performance.md, "Big
-- fan-out"). A foreach iteration's row carries its run params and params
-- (the parent's workflow params, ~1.5 KB each as JSON) and its timeline;
-- PostgreSQL compresses them on every insert and on updates that rewrite
-- the row, and decompresses them on every read: lz4 does both in a fraction
-- of pglz's CPU for a similar size. Only the compression of values written
-- from now on changes (a catalog change, no rewrite): rows written before
-- keep pglz, and each value says how it was compressed, so old rows read as
-- before. lz4 is in every PostgreSQL from 14 (Aurora PostgreSQL 16 here).

-- +goose Up
ALTER TABLE workflow_instance
    ALTER COLUMN definition SET COMPRESSION lz4,
    ALTER COLUMN run_params SET COMPRESSION lz4,
    ALTER COLUMN params SET COMPRESSION lz4,
    ALTER COLUMN initiator SET COMPRESSION lz4,
    ALTER COLUMN timeline SET COMPRESSION lz4,
    ALTER COLUMN runtime_overview SET COMPRESSION lz4,
    ALTER COLUMN artifacts SET COMPRESSION lz4;
ALTER TABLE step_instance
    ALTER COLUMN params SET COMPRESSION lz4,
    ALTER COLUMN outputs SET COMPRESSION lz4,
    ALTER COLUMN runtime_state SET COMPRESSION lz4,
    ALTER COLUMN retry SET COMPRESSION lz4,
    ALTER COLUMN timeline SET COMPRESSION lz4;

-- +goose Down
ALTER TABLE step_instance
    ALTER COLUMN params SET COMPRESSION default,
    ALTER COLUMN outputs SET COMPRESSION default,
    ALTER COLUMN runtime_state SET COMPRESSION default,
    ALTER COLUMN retry SET COMPRESSION default,
    ALTER COLUMN timeline SET COMPRESSION default;
ALTER TABLE workflow_instance
    ALTER COLUMN definition SET COMPRESSION default,
    ALTER COLUMN run_params SET COMPRESSION default,
    ALTER COLUMN params SET COMPRESSION default,
    ALTER COLUMN initiator SET COMPRESSION default,
    ALTER COLUMN timeline SET COMPRESSION default,
    ALTER COLUMN runtime_overview SET COMPRESSION default,
    ALTER COLUMN artifacts SET COMPRESSION default;
