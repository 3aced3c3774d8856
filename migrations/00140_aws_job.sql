-- The AWS jobs step attempts are running (an Athena query, a Glue job run,
-- a Step Functions execution, ...), by the service's own id for the job, so
-- that the service's state-change event (EventBridge -> SQS -> engine) can
-- wake the attempt that waits for it instead of the attempt polling. A row
-- is written right after the job starts (or is found again after a crash)
-- and deleted when the attempt sees the job end. See docs/step-runtimes.md,
-- "AWS jobs".

-- +goose Up
CREATE TABLE aws_job (
    service     text        NOT NULL,
    job_id      text        COLLATE "C" NOT NULL,
    step_uuid   uuid        NOT NULL,
    workflow_id text        COLLATE "C" NOT NULL,
    instance_id bigint      NOT NULL,
    run_id      bigint      NOT NULL,
    step_id     text        NOT NULL,
    attempt_id  bigint      NOT NULL,
    create_time timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (service, job_id)
);

-- +goose Down
DROP TABLE aws_job;
