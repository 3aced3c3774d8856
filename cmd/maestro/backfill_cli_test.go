package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/cli"
	"github.com/maestro-aws/maestro/engine/dbtest"
	backfilldriver "github.com/maestro-aws/maestro/engine/trigger/backfill"
)

// TestCLIBackfill runs a backfill from the command line against maestro
// dev: start --watch shows the progress to the end (exit 0), then list,
// get, a refused action and JSON output.
func TestCLIBackfill(t *testing.T) {
	t.Parallel()
	api := "http://" + startServer(t, []string{"dev"}, "DATABASE_URL="+dbtest.URL(t), backfilldriver.EnvInterval+"=100ms").addr
	def := filepath.Join(t.TempDir(), "daily.json")
	if err := os.WriteFile(def, []byte(`{"properties":{"owner":"alice","run_strategy":{"rule":"PARALLEL","workflow_concurrency":5}},
		"workflow":{"id":"daily","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := maestroCLI(t, api, "push", def); code != 0 {
		t.Fatalf("push: %d %q %q", code, out, errOut)
	}
	code, out, errOut := maestroCLI(t, api, "backfill", "start", "daily", "--param", "TARGET_RUN_DATE", "--from", "20240101",
		"--to", "20240105", "--concurrency", "2", "--watch", "--interval-watch", "100ms")
	if code != cli.ExitOK {
		t.Fatalf("backfill start --watch exited %d:\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`backfill ([0-9a-f-]{36}): 5 partitions of daily version 1`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "SUCCEEDED [##############################] 5/5  SUCCEEDED 5") {
		t.Fatalf("backfill start --watch printed:\n%s", out)
	}
	id := m[1]
	if code, out, _ := maestroCLI(t, api, "backfill", "list", "daily"); code != 0 || !strings.Contains(out, id) ||
		!strings.Contains(out, "20240101..20240105") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	if code, out, _ := maestroCLI(t, api, "backfill", "get", id); code != 0 || !regexp.MustCompile(`20240103\s+\d+\s+SUCCEEDED`).MatchString(out) {
		t.Fatalf("get: %d\n%s", code, out)
	}
	code, _, errOut = maestroCLI(t, api, "backfill", "pause", id)
	if code != cli.ExitError || !strings.Contains(errOut, "cannot pause a SUCCEEDED backfill") {
		t.Fatalf("pause of an ended backfill: %d %q", code, errOut)
	}
	code, out, _ = maestroCLI(t, api, "-o", "json", "backfill", "get", id)
	var b struct {
		Status     string           `json:"status"`
		Partitions []map[string]any `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil || b.Status != "SUCCEEDED" || len(b.Partitions) != 5 {
		t.Fatalf("get -o json: %d %v\n%s", code, err, out)
	}
	// A backfill that fails its start exits non-zero with the API's message.
	code, _, errOut = maestroCLI(t, api, "backfill", "start", "daily", "--param", "TARGET_RUN_DATE", "--from", "20240105", "--to", "20240101")
	if code != cli.ExitError || !strings.Contains(errOut, "is after to") {
		t.Fatalf("bad range: %d %q", code, errOut)
	}
}
