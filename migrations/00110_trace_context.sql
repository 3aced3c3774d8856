-- Tracing (docs/tracing.md): the W3C traceparent of the span that wrote a
-- queue message or created a run, so that the engine continues the API
-- request's trace when it handles the message, and a run's events (read
-- with their run's trace_context) share that trace on SQS and SNS.
-- Expand-only: nullable columns, no default, no rewrite; a release that
-- does not know them writes NULL (an untraced message or run).

-- +goose Up
ALTER TABLE maestro_queue ADD COLUMN trace_context text;
ALTER TABLE workflow_instance ADD COLUMN trace_context text;

-- +goose Down
ALTER TABLE workflow_instance DROP COLUMN trace_context;
ALTER TABLE maestro_queue DROP COLUMN trace_context;
