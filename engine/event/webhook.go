package event

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Webhook is a sink that POSTs each external event, as JSON, to a URL
// (maestro dev's optional webhook). A response other than 2xx is a failure
// and the event is sent again, so a receiver deduplicates on the
// X-Maestro-Event-Id header (or the body's event_id). A failed POST is
// tried again a few times at once before the forwarder backs off.
type Webhook struct {
	url     string
	cluster string
	client  *http.Client

	mu sync.Mutex
	// sent is the last event delivered: when the forwarder offers a batch
	// again after a failure, the events delivered before it are skipped.
	sent Position
}

// NewWebhook builds a webhook sink for url; client nil means a client with
// a 10 s timeout.
func NewWebhook(url, cluster string, client *http.Client) *Webhook {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Webhook{url: url, cluster: cluster, client: client}
}

// Publish delivers the events one by one, in order.
func (h *Webhook) Publish(ctx context.Context, evs []Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		if !h.sent.Less(e.Position) {
			continue
		}
		body, m, err := Render(Wire(e), "", h.cluster, time.Now())
		if err != nil {
			h.sent = e.Position // nothing could deliver it
			continue
		}
		if err := h.deliver(ctx, body, m); err != nil {
			return fmt.Errorf("webhook event %s: %w", e.EventID(), err)
		}
		h.sent = e.Position
	}
	return nil
}

// webhookAttempts is how often one event is POSTed before the batch is
// reported failed (and the forwarder backs off).
const webhookAttempts = 3

// deliver POSTs one event, trying again shortly after a failure.
func (h *Webhook) deliver(ctx context.Context, body []byte, m Meta) error {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := h.post(ctx, body, m)
		if err == nil || attempt == webhookAttempts || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (h *Webhook) post(ctx context.Context, body []byte, m Meta) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Maestro-Event-Id", m.EventID)
	req.Header.Set("X-Maestro-Event-Type", string(m.Type))
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", h.url, resp.Status)
	}
	return nil
}
