-- Output params set by external jobs, tag permits and step breakpoints.
-- See docs/params.md.

-- +goose Up

-- Output params an external job set for a step attempt through
-- PUT /api/v3/output-data. The attempt's uuid (its step_instance_uuid
-- param) is the job's credential. The step merges them into its params when
-- it finishes.
CREATE TABLE step_output_data (
    step_uuid   uuid        PRIMARY KEY,
    workflow_id text        NOT NULL,
    instance_id bigint      NOT NULL,
    run_id      bigint      NOT NULL,
    step_id     text        NOT NULL,
    attempt_id  bigint      NOT NULL,
    params      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    create_time timestamptz NOT NULL DEFAULT now(),
    modify_time timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (workflow_id, instance_id, run_id, step_id, attempt_id)
        REFERENCES step_instance (workflow_id, instance_id, run_id, step_id, attempt_id) ON DELETE CASCADE
);

-- A tag permit caps how many step attempts carrying the tag hold a permit
-- at once, across workflows and engine nodes.
CREATE TABLE tag_permit (
    tag         text        PRIMARY KEY,
    max_allowed integer     NOT NULL CHECK (max_allowed >= 0),
    created_by  text,
    create_time timestamptz NOT NULL DEFAULT now(),
    modify_time timestamptz NOT NULL DEFAULT now()
);

-- Permits held by step attempts. A row whose attempt ended no longer
-- counts and is deleted by the next acquirer of the tag, so a crash never
-- leaks a permit.
CREATE TABLE tag_permit_held (
    tag         text        NOT NULL,
    step_uuid   uuid        NOT NULL,
    workflow_id text        NOT NULL,
    instance_id bigint      NOT NULL,
    run_id      bigint      NOT NULL,
    step_id     text        NOT NULL,
    attempt_id  bigint      NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tag, step_uuid),
    FOREIGN KEY (workflow_id, instance_id, run_id, step_id, attempt_id)
        REFERENCES step_instance (workflow_id, instance_id, run_id, step_id, attempt_id) ON DELETE CASCADE
);
CREATE INDEX tag_permit_held_uuid_idx ON tag_permit_held (step_uuid);

-- A breakpoint pauses the attempts of a step that match it; a NULL column
-- matches every value.
CREATE TABLE step_breakpoint (
    breakpoint_id    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id      text        NOT NULL,
    step_id          text        NOT NULL,
    workflow_version bigint,
    instance_id      bigint,
    run_id           bigint,
    attempt_id       bigint,
    created_by       text,
    create_time      timestamptz NOT NULL DEFAULT now(),
    UNIQUE NULLS NOT DISTINCT (workflow_id, step_id, workflow_version, instance_id, run_id, attempt_id),
    FOREIGN KEY (workflow_id) REFERENCES workflow (workflow_id) ON DELETE CASCADE
);

-- Attempts a breakpoint paused. Resuming sets resumed and enqueues a
-- step_update message to the owning engine node.
CREATE TABLE step_paused (
    workflow_id text        NOT NULL,
    instance_id bigint      NOT NULL,
    run_id      bigint      NOT NULL,
    step_id     text        NOT NULL,
    attempt_id  bigint      NOT NULL,
    group_id    integer     NOT NULL,
    resumed     boolean     NOT NULL DEFAULT false,
    paused_at   timestamptz NOT NULL DEFAULT now(),
    resumed_at  timestamptz,
    PRIMARY KEY (workflow_id, instance_id, run_id, step_id, attempt_id),
    FOREIGN KEY (workflow_id, instance_id, run_id)
        REFERENCES workflow_instance (workflow_id, instance_id, run_id) ON DELETE CASCADE
);
CREATE INDEX step_paused_waiting_idx ON step_paused (workflow_id, step_id) WHERE NOT resumed;

-- +goose Down
DROP TABLE step_paused;
DROP TABLE step_breakpoint;
DROP TABLE tag_permit_held;
DROP TABLE tag_permit;
DROP TABLE step_output_data;
