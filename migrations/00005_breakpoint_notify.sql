-- Engine nodes cache which workflows have no breakpoints, so that a step
-- need not query for them. Any change to a workflow's breakpoints, whoever
-- makes it, tells them to forget what they cached for it.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION maestro_notify_breakpoint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('maestro_breakpoint', COALESCE(NEW.workflow_id, OLD.workflow_id));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER step_breakpoint_notify AFTER INSERT OR UPDATE OR DELETE ON step_breakpoint
    FOR EACH ROW EXECUTE FUNCTION maestro_notify_breakpoint();

-- +goose Down
DROP TRIGGER step_breakpoint_notify ON step_breakpoint;
DROP FUNCTION maestro_notify_breakpoint();
