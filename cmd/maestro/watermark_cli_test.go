package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/cli"
	"github.com/maestro-aws/maestro/engine/dbtest"
)

// TestCLIWatermark drives an incremental workflow of maestro dev from the
// command line: a table change sent with `maestro signal send` starts a
// run, `maestro watermark get` shows the watermark once it SUCCEEDED and
// the range it covered, `maestro watermark reset` moves it back to the
// table's beginning (and the same range runs again), and a reset of an
// unknown table exits non-zero with the API's message.
func TestCLIWatermark(t *testing.T) {
	t.Parallel()
	api := "http://" + startServer(t, []string{"dev"}, "DATABASE_URL="+dbtest.URL(t), "MAESTRO_SIGNAL_SWEEP=100ms").addr
	def := filepath.Join(t.TempDir(), "incr.json")
	if err := os.WriteFile(def, []byte(`{"properties":{"owner":"alice"},"workflow":{"id":"incr-cli",
		"signal_triggers":[{"incremental":true,"definitions":{"sales.orders":{}}}],
		"steps":[{"step":{"id":"s","type":"NoOp"}}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := maestroCLI(t, api, "push", def); code != 0 {
		t.Fatalf("push: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := maestroCLI(t, api, "signal", "send", "sales.orders", "-p", "table=sales.orders",
		"-p", "namespace=sales", "-p", "snapshot_id=8123456789", "-p", "commit_time=1790000000000", "-p", "operation=append"); code != 0 {
		t.Fatalf("signal send: %d %q %q", code, out, errOut)
	}
	var got struct {
		Watermarks []struct {
			SnapshotID  int64  `json:"snapshot_id"`
			InFlight    *int64 `json:"inflight_instance_id"`
			RunsStarted int64  `json:"runs_started"`
		} `json:"watermarks"`
		Runs []struct {
			State string `json:"state"`
		} `json:"runs"`
	}
	read := func() {
		t.Helper()
		code, out, errOut := maestroCLI(t, api, "-o", "json", "watermark", "get", "incr-cli")
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("watermark get -o json: %d %q %q", code, out, errOut)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for read(); len(got.Watermarks) != 1 || got.Watermarks[0].SnapshotID != 8123456789; read() {
		if time.Now().After(deadline) {
			t.Fatalf("the watermark never reached the change: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, out, _ := maestroCLI(t, api, "watermark", "get", "incr-cli")
	if code != 0 || !strings.Contains(out, "sales.orders  watermark 8123456789 (2026-09-21T") ||
		!strings.Contains(out, "in flight: none") || !strings.Contains(out, "8123456789             1     SUCCEEDED") {
		t.Fatalf("watermark get: %d\n%s", code, out)
	}
	code, out, _ = maestroCLI(t, api, "watermark", "reset", "incr-cli", "--table", "sales.orders", "--snapshot", "0")
	if code != 0 || !strings.Contains(out, "sales.orders of incr-cli: watermark 0 (-), latest 8123456789, pending 1") {
		t.Fatalf("watermark reset: %d\n%s", code, out)
	}
	deadline = time.Now().Add(60 * time.Second)
	for read(); got.Watermarks[0].RunsStarted != 2 || got.Watermarks[0].SnapshotID != 8123456789; read() {
		if time.Now().After(deadline) {
			t.Fatalf("the reset range never ran again: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A backfill of the range from the command line: one run for (0, 8123456789].
	code, out, _ = maestroCLI(t, api, "backfill", "start", "incr-cli", "--table", "sales.orders", "--from-snapshot", "0",
		"--to-snapshot", "8123456789", "--watch", "--interval-watch", "100ms")
	if code != cli.ExitOK || !strings.Contains(out, "1 partitions of incr-cli") || !strings.Contains(out, "SUCCEEDED 1") {
		t.Fatalf("backfill start --table: %d\n%s", code, out)
	}
	code, _, errOut := maestroCLI(t, api, "watermark", "reset", "incr-cli", "--table", "sales.items", "--snapshot", "0")
	if code != cli.ExitError || !strings.Contains(errOut, "has no watermark for table sales.items") {
		t.Fatalf("reset of an unknown table: %d %q", code, errOut)
	}
	if code, _, _ := maestroCLI(t, api, "watermark", "reset", "incr-cli", "--table", "sales.orders"); code != cli.ExitUsage {
		t.Fatalf("reset without --snapshot exited %d", code)
	}
}
