package flowstore

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestActivateCommitsAsynchronously: bringing a passivated run back clears
// its marker in a transaction that does not wait for the WAL flush, and
// the setting ends with that transaction: the connection, one of a pool
// whose sessions commit synchronously, does so again afterwards. A trigger
// records the setting the UPDATE ran under.
func TestActivateCommitsAsynchronously(t *testing.T) {
	db, _, ref, _ := writerFixture(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `
        CREATE TABLE seen_commit (setting text);
        CREATE FUNCTION record_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO seen_commit VALUES (current_setting('synchronous_commit'));
            RETURN NEW;
        END $$;
        UPDATE workflow_instance SET passive_wake_at = now() + interval '1 hour'
            WHERE workflow_id = 'wf' AND instance_id = 1;
        CREATE TRIGGER record_commit AFTER UPDATE ON workflow_instance FOR EACH ROW EXECUTE FUNCTION record_commit();`); err != nil {
		t.Fatal(err)
	}
	// One connection, synchronous by its session's setting (the test
	// cluster's default is off).
	cfg := db.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	s := New(one, slog.New(slog.NewTextHandler(io.Discard, nil)))

	row, steps, ok, err := s.Activate(ctx, ref, 0, 5, "me")
	if err != nil || !ok {
		t.Fatalf("activate: ok %v, %v", ok, err)
	}
	if row.InstanceID != ref.InstanceID || len(steps) != 1 || steps[0].StepID != "s" {
		t.Fatalf("activate returned run %d with %d steps", row.InstanceID, len(steps))
	}
	var marked bool
	if err := one.QueryRow(ctx, `SELECT passive_wake_at IS NOT NULL FROM workflow_instance
        WHERE workflow_id = 'wf' AND instance_id = 1`).Scan(&marked); err != nil || marked {
		t.Fatalf("marker still set (%v) after the activation", err)
	}
	var seen string
	if err := one.QueryRow(ctx, `SELECT coalesce(string_agg(setting, ','), '') FROM seen_commit`).Scan(&seen); err != nil {
		t.Fatal(err)
	}
	if seen != "off" {
		t.Fatalf("the activation's UPDATE ran with synchronous_commit %q, want off", seen)
	}
	var after string
	if err := one.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != "on" {
		t.Fatalf("the connection kept synchronous_commit %q after the activation, want on", after)
	}
}
