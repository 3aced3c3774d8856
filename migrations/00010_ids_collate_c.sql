-- Workflow ids and run keys compare byte by byte. See docs/foreach.md.

-- +goose Up

-- Inline runs (foreach and while iterations) have workflow ids that extend
-- the pushed workflow's id with ':' parts, and a child's parent_key extends
-- its parent attempt's key with '/' parts. Deleting a workflow's runs and
-- the rollup select those by a range of the primary key or of the
-- parent_key index ('wf:' up to 'wf;'), which is only the prefix under a
-- byte-wise collation: a linguistic one (en_US, Aurora's default) ignores
-- punctuation when it sorts. Ids are identifiers, never text sorted for
-- people, so every workflow_id column (and parent_key) uses "C", whatever
-- the database's default. All of them, not some: a join of a "C" column
-- with a default-collation one compares under "C" and cannot use the
-- other side's index.
ALTER TABLE workflow ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE workflow_version ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE workflow_properties_snapshot ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE workflow_timeline ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE workflow_deletion ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE step_breakpoint ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE workflow_instance ALTER COLUMN workflow_id TYPE text COLLATE "C",
    ALTER COLUMN parent_key TYPE text COLLATE "C";
ALTER TABLE step_instance ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE step_output_data ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE tag_permit_held ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE step_paused ALTER COLUMN workflow_id TYPE text COLLATE "C";
ALTER TABLE step_signal_wait ALTER COLUMN workflow_id TYPE text COLLATE "C";

-- +goose Down
ALTER TABLE step_signal_wait ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE step_paused ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE tag_permit_held ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE step_output_data ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE step_instance ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE workflow_instance ALTER COLUMN workflow_id TYPE text COLLATE "default",
    ALTER COLUMN parent_key TYPE text COLLATE "default";
ALTER TABLE step_breakpoint ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE workflow_deletion ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE workflow_timeline ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE workflow_properties_snapshot ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE workflow_version ALTER COLUMN workflow_id TYPE text COLLATE "default";
ALTER TABLE workflow ALTER COLUMN workflow_id TYPE text COLLATE "default";
