-- Run identities compare byte by byte. See docs/foreach.md.

-- +goose Up

-- Inline runs (foreach and while iterations) have workflow ids that extend
-- the pushed workflow's id with ':' parts, and a child's parent_key extends
-- its parent attempt's key with '/' parts. Deleting a workflow's runs and
-- the rollup select those by a range of the primary key or of the
-- parent_key index ('wf:' up to 'wf;'), which is only the prefix under a
-- byte-wise collation: a linguistic one (en_US, Aurora's default) ignores
-- punctuation when it sorts. The ids are identifiers, never text to sort
-- for people, so every column holding a run's workflow id (or parent key)
-- uses "C", whatever the database's default.
ALTER TABLE workflow_instance ALTER COLUMN workflow_id TYPE text COLLATE "C",
    ALTER COLUMN parent_key TYPE text COLLATE "C";

-- +goose Down
ALTER TABLE workflow_instance ALTER COLUMN workflow_id TYPE text COLLATE "default",
    ALTER COLUMN parent_key TYPE text COLLATE "default";
