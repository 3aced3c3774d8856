-- The status guards of workflow_instance and step_instance (00002) called
-- their PL/pgSQL function for every update that moved a row's seq or
-- status, which is nearly every write of a run or a step, only for it to
-- find nothing wrong. Their WHEN now holds the two conditions the function
-- raises on (a seq not after the stored one; a status left from a terminal
-- one), evaluated without a function call: the function runs only to
-- raise, with the same errors as before. An update that moves neither seq
-- nor status fires nothing, as before.

-- +goose Up
CREATE OR REPLACE TRIGGER step_instance_guard BEFORE UPDATE ON step_instance
    FOR EACH ROW WHEN (NEW.seq < OLD.seq OR (NEW.seq = OLD.seq AND NEW.status IS DISTINCT FROM OLD.status)
        OR (NEW.status IS DISTINCT FROM OLD.status AND OLD.status IN (
            'SUCCEEDED', 'COMPLETED_WITH_ERROR', 'UNSATISFIED', 'SKIPPED', 'DISABLED',
            'FATALLY_FAILED', 'INTERNALLY_FAILED', 'STOPPED', 'TIMED_OUT',
            'USER_FAILED', 'PLATFORM_FAILED', 'TIMEOUT_FAILED')))
    EXECUTE FUNCTION maestro_guard_status(
        'SUCCEEDED', 'COMPLETED_WITH_ERROR', 'UNSATISFIED', 'SKIPPED', 'DISABLED',
        'FATALLY_FAILED', 'INTERNALLY_FAILED', 'STOPPED', 'TIMED_OUT',
        'USER_FAILED', 'PLATFORM_FAILED', 'TIMEOUT_FAILED');

CREATE OR REPLACE TRIGGER workflow_instance_guard BEFORE UPDATE ON workflow_instance
    FOR EACH ROW WHEN (NEW.seq < OLD.seq OR (NEW.seq = OLD.seq AND NEW.status IS DISTINCT FROM OLD.status)
        OR (NEW.status IS DISTINCT FROM OLD.status AND OLD.status IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT')))
    EXECUTE FUNCTION maestro_guard_status('SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT');

-- +goose Down
CREATE OR REPLACE TRIGGER step_instance_guard BEFORE UPDATE ON step_instance
    FOR EACH ROW WHEN (OLD.seq IS DISTINCT FROM NEW.seq OR OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION maestro_guard_status(
        'SUCCEEDED', 'COMPLETED_WITH_ERROR', 'UNSATISFIED', 'SKIPPED', 'DISABLED',
        'FATALLY_FAILED', 'INTERNALLY_FAILED', 'STOPPED', 'TIMED_OUT',
        'USER_FAILED', 'PLATFORM_FAILED', 'TIMEOUT_FAILED');

CREATE OR REPLACE TRIGGER workflow_instance_guard BEFORE UPDATE ON workflow_instance
    FOR EACH ROW WHEN (OLD.seq IS DISTINCT FROM NEW.seq OR OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION maestro_guard_status('SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT');
