package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/api"
	"github.com/maestro-aws/maestro/engine/archive"
	"github.com/maestro-aws/maestro/engine/cli"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/flow/flowtest"
	"github.com/maestro-aws/maestro/engine/retention"
)

// TestArchiveGet: `maestro archive get WF INSTANCE` shows a run the
// archiver moved out of the database, from a real API over a real archive.
func TestArchiveGet(t *testing.T) {
	env := flowtest.New(t)
	env.Engine(nil, flow.Config{})
	env.Push(`{"properties":{"owner":"tester"},"workflow":{"id":"gone","steps":[
	  {"step":{"id":"first","type":"NoOp"}},{"step":{"id":"second","type":"NoOp"}}]}}`)
	env.Wait(env.Start("gone"), time.Minute)
	ctx := context.Background()
	if _, err := env.Defs.Deactivate(ctx, "gone", definition.Actor{Name: "tester"}); err != nil {
		t.Fatal(err)
	}
	dir, err := archive.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := retention.New(env.Pool, dir, retention.Config{Retention: time.Hour, Pause: -1, Logger: logger,
		Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Run(ctx); err != nil || res.Runs != 1 {
		t.Fatalf("archive: %+v %v", res, err)
	}
	h, err := api.New(api.Config{DB: env.Pool, Logger: logger, Definitions: env.Defs, Runs: env.Runs,
		TrustUserHeader: true, Archive: retention.NewReader(env.Pool, dir)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	run := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		root := cli.NewRoot(cli.Options{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
		code := cli.Run(ctx, root, append([]string{"--api", srv.URL, "--user", "tester"}, args...))
		return out.String() + errOut.String(), code
	}
	out, code := run("archive", "get", "gone", "1")
	if code != 0 || !strings.Contains(out, "workflow gone instance 1 run 1 (ARCHIVED)") || !strings.Contains(out, "SUCCEEDED") ||
		!strings.Contains(out, "runs/workflow_id=gone/date=") || !strings.Contains(out, "first") || !strings.Contains(out, "second") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = run("archive", "get", "gone", "1", "-o", "json")
	var rec map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec["archived"] != true || len(rec["steps"].([]any)) != 2 {
		t.Fatalf("json: exit %d:\n%s", code, out)
	}
	if out, code = run("archive", "get", "gone", "2"); code == 0 {
		t.Fatalf("a run the archive does not hold: exit 0:\n%s", out)
	}
}
