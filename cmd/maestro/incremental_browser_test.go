package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maestro-aws/maestro/engine/client"
	"github.com/maestro-aws/maestro/engine/dbtest"
)

// TestUIIncrementalWatermark: the workflow page of an incremental workflow
// shows the watermark of its table and the range each run covered; a
// range links to its run, whose page shows the range it covers.
func TestUIIncrementalWatermark(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	base := "http://" + startServer(t, []string{"dev"}, "DATABASE_URL="+dbtest.URL(t), "MAESTRO_SIGNAL_SWEEP=100ms").addr
	c, err := client.New(client.Options{BaseURL: base, User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if _, err := c.Push(bg, []byte(`{"properties": {"owner": "alice"}, "workflow": {"id": "orders-incr",
		"signal_triggers": [{"incremental": true, "definitions": {"sales.orders": {}}}],
		"steps": [{"step": {"id": "load", "type": "NoOp"}}]}}`), false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendSignal(bg, "sales.orders", map[string]any{"table": "sales.orders", "snapshot_id": 5123456789,
		"commit_time": 1790000000000, "operation": "append"}, ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		w, _, err := c.Watermarks(bg, "orders-incr", "", 0)
		if err == nil && len(w.Watermarks) == 1 && w.Watermarks[0].SnapshotID == 5123456789 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watermark never moved: %+v %v", w, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx,
		chromedp.Navigate(base+"/ui/"),
		chromedp.Evaluate(`localStorage.setItem('maestro.user', 'alice')`, nil),
		chromedp.Navigate(base+"/ui/#/workflows/orders-incr"),
		chromedp.WaitVisible(`#watermarks`, chromedp.ByQuery),
		chromedp.WaitVisible(`#ranges a`, chromedp.ByQuery),
	); err != nil {
		got, _ := text(ctx, `main`)
		t.Fatalf("the workflow page: %v\n%s", err, got)
	}
	marks, _ := text(ctx, `#watermarks`)
	ranges, _ := text(ctx, `#ranges`)
	if !strings.Contains(marks, "sales.orders") || !strings.Contains(marks, "5123456789") ||
		!strings.Contains(ranges, "(0, 5123456789]") || !strings.Contains(ranges, "SUCCEEDED") {
		t.Fatalf("watermarks %q, ranges %q", marks, ranges)
	}
	if err := chromedp.Run(ctx,
		chromedp.Click(`#ranges a`, chromedp.ByQuery),
		chromedp.Poll(`(document.querySelector('#range') || {}).textContent === undefined ? false :
			document.querySelector('#range').textContent.includes('sales.orders: snapshots (0, 5123456789]')`, nil,
			chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		got, _ := text(ctx, `main`)
		t.Fatalf("the run page does not show its range: %v\n%s", err, got)
	}
	screenshot(t, ctx, "incremental.png")
}
