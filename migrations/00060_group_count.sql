-- The deployment's flow group count, recorded once so that every process
-- that starts runs (the engine, the API and the other Lambdas) computes the
-- same groups: a process configured with a different count refuses to start
-- (engine/groupcount). One row at most.

-- +goose Up
CREATE TABLE flow_group_count (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    group_count integer     NOT NULL CHECK (group_count BETWEEN 1 AND 4096),
    recorded_by text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- A database an engine already ran on keeps the count it created groups for.
INSERT INTO flow_group_count (group_count, recorded_by)
SELECT count(*), 'migration 00060' FROM flow_group HAVING count(*) > 0;

-- +goose Down
DROP TABLE flow_group_count;
