-- Least privilege (docs/deploy.md "Database: migrations, roles, TLS"): the
-- engine and the functions connect as maestro_app, which may read and write
-- rows but not change the schema. The schema belongs to whoever applies the
-- migrations (maestro_owner in AWS, created with its login by the migrate
-- function before it runs these files as that role).
--
-- Roles are cluster-wide while migrations run per database, and many
-- databases of one cluster may be migrated at once (tests), so the role is
-- created only when missing and a concurrent creation is not an error.
-- Every statement is safe to repeat.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'maestro_app') THEN
        CREATE ROLE maestro_app NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- another database's migration created it meanwhile
END
$$;
-- +goose StatementEnd

GRANT USAGE ON SCHEMA public TO maestro_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO maestro_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO maestro_app;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO maestro_app;

-- Tables, sequences and functions later migrations create (as the role that
-- runs them, the schema owner) are granted the same.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO maestro_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO maestro_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO maestro_app;

-- +goose Down
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON FUNCTIONS FROM maestro_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM maestro_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM maestro_app;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM maestro_app;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM maestro_app;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM maestro_app;
REVOKE USAGE ON SCHEMA public FROM maestro_app;
