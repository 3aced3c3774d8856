-- Workflow definitions: one row per workflow, its immutable versions, its
-- properties snapshots and its change timeline.

-- +goose Up
CREATE TABLE workflow (
    workflow_id        text PRIMARY KEY,
    -- NULL while no version is active (inactive workflows are not triggered).
    active_version     bigint,
    latest_version     bigint      NOT NULL DEFAULT 0,
    properties_version bigint      NOT NULL DEFAULT 0,
    -- The current properties (the latest snapshot), kept here for cheap reads.
    properties         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    owner              text        NOT NULL,
    created_by         text        NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    modified_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE workflow_version (
    workflow_id  text        NOT NULL REFERENCES workflow (workflow_id) ON DELETE CASCADE,
    version      bigint      NOT NULL,
    -- The "workflow" object exactly as validated (canonical JSON).
    definition   jsonb       NOT NULL,
    -- sha256 of the canonical definition: a push identical to the latest
    -- version returns it instead of creating a new one.
    fingerprint  bytea       NOT NULL,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, version)
);

CREATE TABLE workflow_properties_snapshot (
    workflow_id      text        NOT NULL REFERENCES workflow (workflow_id) ON DELETE CASCADE,
    snapshot_version bigint      NOT NULL,
    properties       jsonb       NOT NULL,
    author           text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, snapshot_version)
);

-- The timeline outlives the workflow (it records the deletion too), so it
-- has no foreign key.
CREATE TABLE workflow_timeline (
    workflow_id text        NOT NULL,
    event_id    bigint      GENERATED ALWAYS AS IDENTITY,
    event       jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, event_id)
);

-- A workflow deleted with more instances than are deleted inline: its
-- definition rows are gone, its instances are removed in batches by the
-- DeleteWorkflow queue handler, which drops this row when done. While the
-- row exists the id cannot be pushed again, so a new workflow never meets
-- the old one's instances.
CREATE TABLE workflow_deletion (
    workflow_id text        PRIMARY KEY,
    deletion_id uuid        NOT NULL DEFAULT gen_random_uuid(),
    author      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE workflow_deletion;
DROP TABLE workflow_timeline;
DROP TABLE workflow_properties_snapshot;
DROP TABLE workflow_version;
DROP TABLE workflow;
