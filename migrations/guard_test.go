package migrations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// The status guards of runs and steps refuse a write that is not after the
// stored one (serialization_failure) and one that leaves a terminal status
// (check_violation), and let every other write through.
func TestStatusGuardsRefuseStaleAndPostTerminalWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
INSERT INTO workflow_instance (workflow_id, instance_id, run_id, workflow_version, uuid, group_count, group_id, status, definition, timeout_seconds)
VALUES ('guarded', 1, 1, 1, gen_random_uuid(), 1, 0, 'IN_PROGRESS', '{}', 0);
INSERT INTO step_instance (workflow_id, instance_id, run_id, step_id, attempt_id, uuid, status, step_type)
VALUES ('guarded', 1, 1, 's', 1, gen_random_uuid(), 'RUNNING', 'NoOp')`); err != nil {
		t.Fatal(err)
	}
	for _, table := range []struct{ name, where, terminal string }{
		{"workflow_instance", "workflow_id = 'guarded'", "SUCCEEDED"},
		{"step_instance", "workflow_id = 'guarded' AND step_id = 's'", "SUCCEEDED"},
	} {
		for _, c := range []struct {
			set  string
			code string // "" for allowed
		}{
			{"seq = seq + 1", ""},
			{"modify_time = now()", ""},
			{"seq = seq - 1", "40001"},
			{"status = 'PAUSED'", "40001"},
			{"status = '" + table.terminal + "', seq = seq + 1", ""},
			{"status = 'RUNNING', seq = seq + 1", "23514"},
			{"timeline = timeline", ""},
		} {
			_, err := conn.Exec(ctx, "UPDATE "+table.name+" SET "+c.set+" WHERE "+table.where)
			var pgErr *pgconn.PgError
			switch {
			case c.code == "" && err != nil:
				t.Errorf("%s: SET %s refused: %v", table.name, c.set, err)
			case c.code != "" && (!errors.As(err, &pgErr) || pgErr.Code != c.code):
				t.Errorf("%s: SET %s: got %v, want SQLSTATE %s", table.name, c.set, err, c.code)
			}
		}
	}
}
