package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maestro-aws/maestro/engine/client"
)

// pushNamed pushes NoOp workflows with the given ids and names.
func pushNamed(t *testing.T, c *client.Client, names map[string]string) {
	t.Helper()
	for id, name := range names {
		def := `{"workflow": {"id": "` + id + `", "name": "` + name + `", "steps": [{"step": {"id": "a", "type": "NoOp"}}]}}`
		if _, err := c.Push(context.Background(), []byte(def), false, false); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUIWorkflowSearch: the workflows page lists every workflow and
// narrows the list as a person types; a row leads to the workflow's page.
func TestUIWorkflowSearch(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	base, c := uiServer(t)
	pushNamed(t, c, map[string]string{"daily_orders": "Daily orders", "hourly_clicks": "Hourly clicks", "daily_users": "Users, every day"})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rows := func() []string {
		var ids []string
		if err := chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll('#workflows tbody tr td:first-child')].map(td => td.textContent)`, &ids)); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	err := chromedp.Run(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`#workflows tbody tr`, chromedp.ByQuery))
	if err != nil {
		t.Fatalf("open the workflows page: %v", err)
	}
	if got := strings.Join(rows(), ","); got != "daily_orders,daily_users,hourly_clicks" {
		t.Fatalf("workflows listed: %s", got)
	}
	screenshot(t, ctx, "workflows.png")
	err = chromedp.Run(ctx, chromedp.SendKeys(`#search`, "daily", chromedp.ByQuery),
		chromedp.Poll(`document.querySelectorAll('#workflows tbody tr').length === 2`, nil, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil || strings.Join(rows(), ",") != "daily_orders,daily_users" {
		t.Fatalf("search daily: %v %v", rows(), err)
	}
	err = chromedp.Run(ctx, chromedp.Click(`#workflows a[href="#/workflows/daily_users"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`body[data-ready="workflows"] svg.dag`, chromedp.ByQuery))
	if err != nil {
		t.Fatalf("open daily_users: %v", err)
	}
	if got, _ := text(ctx, `h1`); got != "Users, every day" {
		t.Fatalf("the workflow page is titled %q", got)
	}
}

// TestCLIListWorkflows: maestro list shows the workflows, --search narrows
// them, -o json gives the API's page.
func TestCLIListWorkflows(t *testing.T) {
	t.Parallel()
	base, c := uiServer(t)
	pushNamed(t, c, map[string]string{"daily_orders": "Daily orders", "hourly_clicks": "Hourly clicks"})
	code, out, errOut := maestroCLI(t, base, "list")
	if code != 0 || !regexpLine(out, `^daily_orders\s+alice\s+1\s+1\s+-\s+.*Daily orders$`) || !strings.Contains(out, "hourly_clicks") {
		t.Fatalf("list: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = maestroCLI(t, base, "list", "--search", "hourly")
	if code != 0 || strings.Contains(out, "daily_orders") || !strings.Contains(out, "hourly_clicks") {
		t.Fatalf("list --search hourly: %d\n%s", code, out)
	}
	code, out, _ = maestroCLI(t, base, "-o", "json", "list")
	if code != 0 || !strings.Contains(out, `"workflow_id": "daily_orders"`) {
		t.Fatalf("list -o json: %d\n%s", code, out)
	}
	// Completion of workflow ids comes from the same listing.
	var buf, errBuf bytes.Buffer
	code = run(context.Background(), []string{"__complete", "--api", base, "start", "dai"}, &buf, &errBuf)
	out = buf.String()
	if code != 0 || !strings.Contains(out, "daily_orders\n") || strings.Contains(out, "hourly") {
		t.Fatalf("completion: %d\n%s", code, out)
	}
}
