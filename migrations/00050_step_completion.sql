-- Completion calls of step attempts whose job reports back by itself (an
-- asynchronous Lambda step): PUT /api/v3/step-completion writes one row per
-- attempt, and the step's runtime ends the attempt with its state. See
-- docs/step-runtimes.md.

-- +goose Up
CREATE TABLE step_completion (
    step_uuid   uuid        PRIMARY KEY,
    workflow_id text        COLLATE "C" NOT NULL,
    instance_id bigint      NOT NULL,
    run_id      bigint      NOT NULL,
    step_id     text        NOT NULL,
    attempt_id  bigint      NOT NULL,
    state       text        NOT NULL CHECK (state IN ('DONE', 'USER_ERROR', 'PLATFORM_ERROR', 'FATAL_ERROR')),
    message     text        NOT NULL DEFAULT '',
    create_time timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (workflow_id, instance_id, run_id, step_id, attempt_id)
        REFERENCES step_instance (workflow_id, instance_id, run_id, step_id, attempt_id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE step_completion;
