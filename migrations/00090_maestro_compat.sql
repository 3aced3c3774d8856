-- What Maestro's API keeps and returns that was not stored before
-- (docs/maestro-compatibility.md): a version's metadata (git_info and the
-- extra fields of the push), when and by whom a version was activated, a
-- tag permit's extra fields and its timeline, the artifacts sent with
-- output data, and job templates.

-- +goose Up

-- metadata: {"git_info": {...}, "extra": {"source": ..., "dsl_lang": ...}}.
ALTER TABLE workflow_version
    ADD COLUMN metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN activate_time timestamptz,
    ADD COLUMN activated_by  text;

-- The versions active now were activated when they were created, as far
-- as anything recorded says.
UPDATE workflow_version v SET activate_time = v.created_at, activated_by = v.created_by
FROM workflow w WHERE w.workflow_id = v.workflow_id AND w.active_version = v.version;

-- extra_info: the request's fields besides tag and max_allowed (Maestro
-- keeps them, e.g. "source"); timeline: Maestro's LOG events of the
-- permit's changes, newest last, at most 32.
ALTER TABLE tag_permit
    ADD COLUMN extra_info jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN timeline   jsonb NOT NULL DEFAULT '[]'::jsonb;

-- Job templates (Maestro's JobTemplate): params a typed step of
-- step_type with sub_type job_type inherits, one row per version tag.
CREATE TABLE job_template (
    job_type    text        COLLATE "C" NOT NULL,
    version     text        COLLATE "C" NOT NULL,
    step_type   text        NOT NULL,
    -- The template: {"metadata": {...}, "definition": {...}} as Maestro's.
    template    jsonb       NOT NULL,
    created_by  text        NOT NULL,
    create_time timestamptz NOT NULL DEFAULT now(),
    modify_time timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_type, version)
);
CREATE INDEX job_template_version_idx ON job_template (version, job_type);

-- Artifacts an external job sent with its output params (Maestro's
-- StepOutputDataRequest.artifacts), shown on the attempt.
ALTER TABLE step_output_data ADD COLUMN artifacts jsonb NOT NULL DEFAULT '{}'::jsonb;

-- +goose Down
ALTER TABLE step_output_data DROP COLUMN artifacts;
DROP TABLE job_template;
ALTER TABLE tag_permit DROP COLUMN timeline, DROP COLUMN extra_info;
ALTER TABLE workflow_version DROP COLUMN activated_by, DROP COLUMN activate_time, DROP COLUMN metadata;
