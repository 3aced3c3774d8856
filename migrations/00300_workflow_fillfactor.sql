-- A workflow's row is rewritten by every batch of starts that allocates
-- its instance ids (run.LockAllocate: one UPDATE of latest_instance_id per
-- workflow). The column is not indexed, so the update can be HOT (the new
-- version on the same page, no index entry, the WAL record holding only
-- the changed bytes) when the page has room for it. With PostgreSQL's
-- default fillfactor of 100 it has none: a batch of 1,000 workflows
-- updates every row of a page in one statement, and 70 % of the updates
-- went to another page, each with a full copy of the row in the WAL and a
-- new entry in workflow_pkey (docs/performance.md, "Starts, fourth pass").
-- Pages filled to half keep room for every row of a page to be updated
-- once more before the old versions are pruned. Only pages written from
-- now on are filled to the new factor (a catalog change, no rewrite); the
-- table holds one row per workflow, so the space is small.

-- +goose Up
ALTER TABLE workflow SET (fillfactor = 50);

-- +goose Down
ALTER TABLE workflow RESET (fillfactor);
