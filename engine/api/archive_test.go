package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/retention"
)

// TestArchivedRunAnswersFromTheArchive: once the archiver moved a run out
// of the database, GET of the run answers Maestro's WorkflowInstance from
// the archive, marked archived, and the archive endpoint the whole record;
// a run neither holds is still 404.
func TestArchivedRunAnswersFromTheArchive(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	dir, err := archive.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defs := definition.NewStore(pool)
	srv, err := api.New(api.Config{DB: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Definitions: defs, Runs: execution.New(pool, defs, 0), Admins: []string{admin}, TrustUserHeader: true,
		Archive: retention.NewReader(pool, dir)})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, pool: pool, defs: defs, h: srv}
	e.withEngine()
	e.send(http.MethodPost, "/api/v3/workflows", "alice", runWorkflow).expect(t, http.StatusOK)
	e.send(http.MethodPost, "/api/v3/workflows/runme/versions/latest/actions/start", "alice", `{}`).expect(t, http.StatusOK)
	before := e.waitTerminal("/api/v3/workflows/runme/instances/1/runs/1")
	// Deactivated, the workflow's last runs may be archived.
	e.send(http.MethodPut, "/api/v3/workflows/runme/actions/deactivate", "alice", "").expect(t, http.StatusOK)

	a, err := retention.New(pool, dir, retention.Config{Retention: time.Hour, Pause: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Run(context.Background()); err != nil || res.Runs != 1 {
		t.Fatalf("archive: %+v, %v", res, err)
	}

	for _, path := range []string{"/api/v3/workflows/runme/instances/1", "/api/v3/workflows/runme/instances/1/runs/1"} {
		r := e.send(http.MethodGet, path, "alice", "").expect(t, http.StatusOK)
		if r.body["archived"] != true || !strings.HasPrefix(r.body["archive_key"].(string), "runs/workflow_id=runme/date=") ||
			r.body["status"] != "SUCCEEDED" || r.body["workflow_uuid"] != before.body["workflow_uuid"] ||
			r.num(t, "runtime_overview.total_step_count") != 2 || r.num(t, "runtime_overview.step_overview.SUCCEEDED.cnt") != 2 {
			t.Fatalf("GET %s answered %s", path, r.raw)
		}
	}
	whole := e.send(http.MethodGet, "/api/v3/workflows/runme/instances/1/archive", "alice", "").expect(t, http.StatusOK)
	steps, ok := whole.body["steps"].([]any)
	if whole.body["archived"] != true || whole.body["format"] != retention.FormatV1 || !ok || len(steps) != 2 {
		t.Fatalf("archive record %s", whole.raw)
	}
	if step, _ := steps[0].(map[string]any); step["timeline"] == nil || step["status"] != "SUCCEEDED" {
		t.Fatalf("archived step %v", steps[0])
	}
	e.send(http.MethodGet, "/api/v3/workflows/runme/instances/1/archive?run=2", "alice", "").expect(t, http.StatusNotFound)
	e.send(http.MethodGet, "/api/v3/workflows/runme/instances/1/archive?run=x", "alice", "").expect(t, http.StatusBadRequest)
	e.send(http.MethodGet, "/api/v3/workflows/runme/instances/2", "alice", "").expect(t, http.StatusNotFound)
	// Ids beyond 32 bits are looked up, not an internal error (found by
	// the API fuzzer).
	e.send(http.MethodGet, "/api/v3/workflows/runme/instances/10248/archive?run=536764642612", "alice", "").expect(t, http.StatusNotFound)
	e.send(http.MethodGet, "/api/v3/workflows/runme/instances/10540/runs/1516523351048", "alice", "").expect(t, http.StatusNotFound)
}
