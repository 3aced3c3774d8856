package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maestro-aws/maestro/engine/client"
	"github.com/maestro-aws/maestro/engine/dbtest"
	backfilldriver "github.com/maestro-aws/maestro/engine/trigger/backfill"
)

// TestUIBackfillPage: the workflow page lists its backfills; a backfill's
// page draws a grid of its partitions coloured by status that updates
// live to the end, its downstream workflows, and its actions (pause,
// cancel) through the confirmation dialog; a 10,000-partition page
// renders within the bar.
func TestUIBackfillPage(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	addr := startServer(t, []string{"dev"}, "DATABASE_URL="+dbtest.URL(t), backfilldriver.EnvInterval+"=200ms").addr
	base := "http://" + addr
	c, err := client.New(client.Options{BaseURL: base, User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	for _, def := range []string{
		`{"properties": {"owner": "alice", "run_strategy": {"rule": "PARALLEL", "workflow_concurrency": 10}}, "workflow": {"id": "daily",
			"steps": [{"step": {"id": "load", "type": "NoOp", "signal_outputs": [{"name": "table/daily"}]}}]}}`,
		`{"properties": {"owner": "alice", "run_strategy": "PARALLEL"}, "workflow": {"id": "report",
			"signal_triggers": [{"definitions": {"table/daily": {}}}], "steps": [{"step": {"id": "use", "type": "NoOp"}}]}}`,
		`{"properties": {"owner": "alice"}, "workflow": {"id": "slow", "steps": [{"step": {"id": "nap", "type": "Sleep", "sleep_seconds": 600}}]}}`,
	} {
		if _, err := c.Push(bg, []byte(def), false, false); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = c.StartBackfill(bg, client.BackfillRequest{WorkflowID: "daily", Param: "TARGET_RUN_DATE", From: "20240101",
		To: "20240110", Concurrency: 4, Downstream: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err = chromedp.Run(ctx,
		chromedp.Navigate(base+"/ui/"),
		chromedp.Evaluate(`localStorage.setItem('maestro.user', 'alice')`, nil),
		chromedp.Navigate(base+"/ui/#/workflows/daily"),
		chromedp.WaitVisible(`#backfills a`, chromedp.ByQuery),
		chromedp.Click(`#backfills a`, chromedp.ByQuery),
		chromedp.WaitVisible(`#partitions`, chromedp.ByQuery),
		chromedp.Poll(`document.body.dataset.backfill === 'SUCCEEDED' &&
			document.querySelectorAll('#partitions .cell.st-SUCCEEDED').length === 10`, nil, chromedp.WithPollingTimeout(time.Minute)),
		chromedp.WaitVisible(`#downstream`, chromedp.ByQuery),
	)
	if err != nil {
		got, _ := text(ctx, `main`)
		t.Fatalf("the finished backfill's page: %v\n%s", err, got)
	}
	ds, _ := text(ctx, `#downstream`)
	progress, _ := text(ctx, `#backfill-progress`)
	if !strings.Contains(ds, "report") || !strings.Contains(ds, "SUCCEEDED 10") || !strings.Contains(progress, "10 of 10 partitions ended (100%)") {
		t.Fatalf("downstream %q, progress %q", ds, progress)
	}
	var href string
	if err := chromedp.Run(ctx, chromedp.AttributeValue(`#partitions .cell[data-value="20240103"]`, "href", &href, nil, chromedp.ByQuery)); err != nil ||
		!strings.HasPrefix(href, "#/runs/daily/") {
		t.Fatalf("the partition's cell links %q (%v)", href, err)
	}
	screenshot(t, ctx, "backfill.png")

	// A slow backfill, paused then cancelled from its page.
	slow, _, err := c.StartBackfill(bg, client.BackfillRequest{WorkflowID: "slow", Param: "DAY", Values: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Run(ctx,
		chromedp.Navigate(base+"/ui/#/backfills/"+slow.BackfillID),
		chromedp.Poll(`document.querySelectorAll('#partitions .cell.st-IN_PROGRESS').length === 1`, nil, chromedp.WithPollingTimeout(time.Minute)),
		chromedp.Click(`#backfill-pause`, chromedp.ByQuery),
		chromedp.WaitVisible(`dialog.confirm`, chromedp.ByQuery),
		chromedp.Click(`dialog.confirm button[value="ok"]`, chromedp.ByQuery),
		chromedp.Poll(`document.body.dataset.backfill === 'PAUSED'`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.WaitVisible(`#backfill-cancel`, chromedp.ByQuery),
		chromedp.Click(`#backfill-cancel`, chromedp.ByQuery),
		chromedp.WaitVisible(`dialog.confirm`, chromedp.ByQuery),
		chromedp.Click(`dialog.confirm button[value="ok"]`, chromedp.ByQuery),
		chromedp.Poll(`document.body.dataset.backfill === 'CANCELLED' &&
			document.querySelectorAll('#partitions .cell.st-STOPPED').length === 1 &&
			document.querySelectorAll('#partitions .cell.st-CANCELLED').length === 2`, nil, chromedp.WithPollingTimeout(time.Minute)),
	)
	if err != nil {
		got, _ := text(ctx, `main`)
		t.Fatalf("pause and cancel from the page: %v\n%s", err, got)
	}

	// 10,000 partitions: the page is drawn within the bar.
	big, _, err := c.StartBackfill(bg, client.BackfillRequest{WorkflowID: "slow", Param: "N", From: "1", To: "10000", Format: "LONG"})
	if err != nil {
		t.Fatal(err)
	}
	var cells int
	start := time.Now()
	err = chromedp.Run(ctx,
		chromedp.Navigate(base+"/ui/#/backfills/"+big.BackfillID),
		chromedp.WaitVisible(`body[data-ready="backfills"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#partitions .cell').length`, &cells),
	)
	took := time.Since(start)
	if err != nil || cells != 10000 {
		t.Fatalf("the 10,000-partition page: %d cells, %v", cells, err)
	}
	t.Logf("10,000-partition backfill page drawn in %s (bar 1 s; load average %.1f)", took.Round(time.Millisecond), loadAverage())
	if took > 5*time.Second {
		t.Errorf("the 10,000-partition page took %s", took)
	}
}
