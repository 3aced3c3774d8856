package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/maestro-aws/maestro/engine/wire"
)

// BackfillRequest is a backfill to start (docs/backfill.md).
type BackfillRequest struct {
	WorkflowID string `json:"-"`
	// Version is "active" (""), "latest" or a number.
	Version     string   `json:"version,omitempty"`
	Param       string   `json:"param"`
	From        string   `json:"from,omitempty"`
	To          string   `json:"to,omitempty"`
	Interval    string   `json:"interval,omitempty"`
	Values      []string `json:"values,omitempty"`
	Format      string   `json:"format,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Order       string   `json:"order,omitempty"`
	Downstream  bool     `json:"downstream,omitempty"`
	Rerun       bool     `json:"rerun,omitempty"`
	RequestID   string   `json:"request_id,omitempty"`
	// Incremental walks snapshot ranges of an incremental workflow's
	// table instead of Param's values (docs/incremental.md).
	Incremental *wire.BackfillIncremental `json:"incremental,omitempty"`
}

// StartBackfill starts a backfill.
func (c *Client) StartBackfill(ctx context.Context, r BackfillRequest) (*wire.BackfillCreated, json.RawMessage, error) {
	raw, err := c.Do(ctx, http.MethodPost, "/api/v3/workflows/"+seg(r.WorkflowID)+"/backfills", nil, r)
	if err != nil {
		return nil, nil, err
	}
	var out wire.BackfillCreated
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, raw, fmt.Errorf("decode the started backfill: %w", err)
	}
	return &out, raw, nil
}

// Backfill reads a backfill with its partitions and downstream runs.
func (c *Client) Backfill(ctx context.Context, id string) (*wire.Backfill, json.RawMessage, error) {
	var out wire.Backfill
	raw, err := c.get(ctx, "/api/v3/backfills/"+seg(id), nil, &out)
	if err != nil {
		return nil, raw, err
	}
	return &out, raw, nil
}

// Backfills lists a workflow's backfills, newest first.
func (c *Client) Backfills(ctx context.Context, workflowID string, limit int) (*wire.BackfillList, json.RawMessage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out wire.BackfillList
	raw, err := c.get(ctx, "/api/v3/workflows/"+seg(workflowID)+"/backfills", q, &out)
	if err != nil {
		return nil, raw, err
	}
	return &out, raw, nil
}

// ActOnBackfill pauses, resumes, cancels or retries a backfill.
func (c *Client) ActOnBackfill(ctx context.Context, id, action string) (*wire.Backfill, json.RawMessage, error) {
	raw, err := c.Do(ctx, http.MethodPost, "/api/v3/backfills/"+seg(id)+"/actions/"+seg(action), nil, nil)
	if err != nil {
		return nil, nil, err
	}
	var out wire.Backfill
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, raw, fmt.Errorf("decode the backfill: %w", err)
	}
	return &out, raw, nil
}
