-- Foreach steps: iterations are inline runs of one workflow id per foreach
-- step and parent instance, instance id = iteration. See docs/foreach.md.

-- +goose Up

-- The foreach step asks, on every wake-up, how many iterations of its run
-- are still live or ended other than SUCCEEDED. Succeeded runs (nearly all
-- of them) stay out of this index, so the question costs index entries in
-- proportion to the live and failed iterations, never to the finished
-- ones: the memory and time a foreach needs per wake-up do not grow with
-- the iterations it has done.
CREATE INDEX workflow_instance_unsucceeded_idx ON workflow_instance (workflow_id, run_id, status, instance_id)
    WHERE status <> 'SUCCEEDED';

-- +goose Down
DROP INDEX workflow_instance_unsucceeded_idx;
