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

// Watermarks reads a workflow's incremental watermarks and the ranges of
// its latest runs (limit of them, 0 for the server's default; of table
// only when it is not empty). docs/incremental.md.
func (c *Client) Watermarks(ctx context.Context, workflowID, table string, limit int) (*wire.Watermarks, json.RawMessage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if table != "" {
		q.Set("table", table)
	}
	var out wire.Watermarks
	raw, err := c.get(ctx, "/api/v3/workflows/"+seg(workflowID)+"/watermarks", q, &out)
	if err != nil {
		return nil, raw, err
	}
	return &out, raw, nil
}

// ResetWatermark moves the watermark of a workflow's table.
func (c *Client) ResetWatermark(ctx context.Context, workflowID string, r wire.WatermarkReset) (*wire.Watermark, json.RawMessage, error) {
	raw, err := c.Do(ctx, http.MethodPost, "/api/v3/workflows/"+seg(workflowID)+"/watermarks/reset", nil, r)
	if err != nil {
		return nil, nil, err
	}
	var out wire.Watermark
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, raw, fmt.Errorf("decode the watermark: %w", err)
	}
	return &out, raw, nil
}
