package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// EventFilter narrows the events of Events.
type EventFilter struct {
	WorkflowID string
	InstanceID int64
	// Types are event type names (WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT, ...).
	Types []string
	// After is the event_id to start after; empty starts at the oldest
	// retained event.
	After string
}

func (f EventFilter) query() url.Values {
	q := url.Values{}
	if f.WorkflowID != "" {
		q.Set("workflow_id", f.WorkflowID)
	}
	if f.InstanceID > 0 {
		q.Set("workflow_instance_id", strconv.FormatInt(f.InstanceID, 10))
	}
	if len(f.Types) > 0 {
		q.Set("type", strings.Join(f.Types, ","))
	}
	if f.After != "" {
		q.Set("after", f.After)
	}
	return q
}

// Event is one of Maestro's events as the API sends it.
type Event struct {
	// ID is the event's position (event_id).
	ID   string
	Data json.RawMessage
}

// errStreamRefused is a server without the live stream (a deployed API):
// the caller falls back to polling pages.
var errStreamRefused = errors.New("the live stream is not served here")

// Events calls fn with each event after f.After, in order. With follow it
// keeps going until ctx ends: over the live stream (Server-Sent Events)
// where the server has one, else by polling pages every poll interval.
func (c *Client) Events(ctx context.Context, f EventFilter, follow bool, poll time.Duration, fn func(Event) error) error {
	if follow {
		err := c.stream(ctx, f, fn)
		if !errors.Is(err, errStreamRefused) {
			return err
		}
	}
	if poll <= 0 {
		poll = 2 * time.Second
	}
	for {
		var page struct {
			Events []json.RawMessage `json:"events"`
			Next   string            `json:"next_event_id"`
		}
		q := f.query()
		q.Set("limit", "1000")
		if _, err := c.get(ctx, "/api/v3/events", q, &page); err != nil {
			return err
		}
		for _, e := range page.Events {
			var id struct {
				EventID string `json:"event_id"`
			}
			_ = json.Unmarshal(e, &id) // an event without an id still prints
			if err := fn(Event{ID: id.EventID, Data: e}); err != nil {
				return err
			}
		}
		if page.Next != "" {
			f.After = page.Next
		}
		if len(page.Events) > 0 {
			continue
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// stream reads the live stream until ctx ends.
func (c *Client) stream(ctx context.Context, f EventFilter, fn func(Event) error) error {
	req, err := c.request(ctx, http.MethodGet, "/api/v3/events", f.query(), nil, "")
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	hc := *c.http
	hc.Timeout = 0 // a stream lasts as long as its reader
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("open the event stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotAcceptable {
		return errStreamRefused
	}
	if resp.StatusCode >= 300 {
		var buf [4096]byte
		n, _ := resp.Body.Read(buf[:])
		return decodeError(resp.StatusCode, buf[:n])
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var ev Event
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() > 0 {
				ev.Data = json.RawMessage(data.String())
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, data = Event{}, strings.Builder{}
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(line[5:], " "))
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the event stream: %w", err)
	}
	return errors.New("the server closed the event stream")
}
