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
    -- sha256 of the canonical definition: an unchanged push returns the
    -- existing version instead of creating a new one.
    fingerprint  bytea       NOT NULL,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, version)
);
CREATE INDEX workflow_version_fingerprint_idx ON workflow_version (workflow_id, fingerprint);

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

-- +goose Down
DROP TABLE workflow_timeline;
DROP TABLE workflow_properties_snapshot;
DROP TABLE workflow_version;
DROP TABLE workflow;
