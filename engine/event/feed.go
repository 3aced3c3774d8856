package event

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Filter selects events of the feed. The zero filter selects every event.
type Filter struct {
	// Types selects these types only.
	Types []Type
	// WorkflowID selects a workflow's events, its foreach and while
	// iterations' included.
	WorkflowID string
	// InstanceID selects one instance's events (with WorkflowID).
	InstanceID int64
	// Since, when set, leaves out the events written before it: with
	// WorkflowID, the creation of the workflow now under that id, so that
	// the events of an earlier workflow of the same id, deleted since, are
	// not replayed as this one's.
	Since time.Time
}

func (f Filter) match(m Meta) bool {
	if len(f.Types) > 0 && !slices.Contains(f.Types, m.Type) {
		return false
	}
	if f.WorkflowID != "" && m.WorkflowID != f.WorkflowID &&
		!(len(m.WorkflowID) > len(f.WorkflowID) && m.WorkflowID[:len(f.WorkflowID)+1] == f.WorkflowID+":") {
		return false
	}
	if f.InstanceID > 0 && m.InstanceID != f.InstanceID {
		return false
	}
	return true
}

// Feed serves the retained events: pages of them (JSON) and, where a hub
// is fed in-process (maestro dev), a live stream that resumes from an
// event id (Server-Sent Events).
type Feed struct {
	db      *pgxpool.Pool
	hub     *Hub
	cluster string
	// Heartbeat is how often an idle stream sends a comment (default 15s).
	Heartbeat time.Duration
}

// NewFeed builds a feed over db. hub may be nil: then the feed serves
// pages only.
func NewFeed(db *pgxpool.Pool, hub *Hub, cluster string) *Feed {
	return &Feed{db: db, hub: hub, cluster: cluster, Heartbeat: 15 * time.Second}
}

// Live reports whether the feed can stream (it has a hub).
func (f *Feed) Live() bool { return f.hub != nil }

// Page is a page of the feed.
type Page struct {
	Events []json.RawMessage `json:"events"`
	// NextEventID is where the next page starts (its after): the last event
	// returned, or the last one looked at when fewer matched.
	NextEventID string `json:"next_event_id"`
}

// scanLimit bounds how many events one page looks at.
const scanLimit = 5000

// Page returns up to limit events after position after that match filter.
func (f *Feed) Page(ctx context.Context, filter Filter, after Position, limit int) (*Page, error) {
	evs, next, _, err := f.read(ctx, filter, after, limit)
	if err != nil {
		return nil, err
	}
	page := &Page{Events: make([]json.RawMessage, 0, len(evs)), NextEventID: next.String()}
	now := time.Now()
	for _, e := range evs {
		b, _, err := Render(Wire(e), "", f.cluster, now)
		if err != nil {
			continue
		}
		page.Events = append(page.Events, b)
	}
	return page, nil
}

// read returns up to limit matching events after after, the position the
// next read starts from, and whether there may be more now.
func (f *Feed) read(ctx context.Context, filter Filter, after Position, limit int) ([]Event, Position, bool, error) {
	var kindArg, wf, iid any
	if len(filter.Types) > 0 {
		ks := make([]int16, len(filter.Types))
		for i, t := range filter.Types {
			ks[i] = int16(kinds[t])
		}
		kindArg = ks
	}
	if filter.WorkflowID != "" {
		wf = filter.WorkflowID
	}
	if filter.InstanceID > 0 {
		iid = filter.InstanceID
	}
	var since any
	if !filter.Since.IsZero() {
		since = filter.Since
	}
	rows, err := f.db.Query(ctx, readFilteredSQL, after.TX, after.ID, scanLimit, limit, kindArg, wf, iid, since)
	if err != nil {
		return nil, after, false, fmt.Errorf("read events after %s: %w", after, err)
	}
	var out []Event
	last, scanned := after, int64(0)
	for rows.Next() {
		var e Event
		var n int64
		var payload []byte
		if err := rows.Scan(&e.TX, &e.ID, &e.Kind, &e.WorkflowID, &e.CreatedAt, &e.Seq, &payload, &n); err != nil {
			rows.Close()
			return nil, after, false, fmt.Errorf("read events after %s: %w", after, err)
		}
		if n > 0 {
			last, scanned = e.Position, n
			continue
		}
		e.Payload = payload
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, after, false, fmt.Errorf("read events after %s: %w", after, err)
	}
	if len(out) == limit {
		return out, out[len(out)-1].Position, true, nil
	}
	return out, last, scanned == scanLimit, nil
}

// ErrNoStream reports a feed without a live hub (the API Lambda).
var ErrNoStream = errors.New("live event stream not available here")

// Stream writes the events matching filter to w as Server-Sent Events
// until ctx ends: from after (replayed from the outbox) when resume is set,
// else from now. Each event's SSE id is its event id, so a client that
// reconnects with Last-Event-ID resumes where it was. A client that falls
// behind the live events is disconnected and resumes the same way.
func (f *Feed) Stream(ctx context.Context, w http.ResponseWriter, filter Filter, after Position, resume bool) error {
	if f.hub == nil {
		return ErrNoStream
	}
	sub := f.hub.Subscribe(4096)
	defer sub.Close()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": maestro events\nretry: 2000\n\n"); err != nil {
		return nil
	}
	_ = rc.Flush()
	last := after
	for resume {
		evs, next, more, err := f.read(ctx, filter, last, 500)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, e := range evs {
			b, _, err := Render(Wire(e), "", f.cluster, now)
			if err != nil {
				continue
			}
			if err := writeSSE(w, e.EventID(), b); err != nil {
				return nil
			}
		}
		_ = rc.Flush()
		last, resume = next, more
	}
	beat := time.NewTicker(f.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r, ok := <-sub.C:
			if !ok {
				return nil // fell behind: the client reconnects with its last id
			}
			if !last.Less(r.Position) {
				continue // replayed already
			}
			last = r.Position
			if !filter.match(r.Meta) {
				continue
			}
			if err := writeSSE(w, r.EventID, r.JSON); err != nil {
				return nil
			}
			// Flush what is queued together.
			for len(sub.C) > 0 {
				r, ok := <-sub.C
				if !ok {
					_ = rc.Flush()
					return nil
				}
				if !last.Less(r.Position) {
					continue
				}
				last = r.Position
				if filter.match(r.Meta) {
					if err := writeSSE(w, r.EventID, r.JSON); err != nil {
						return nil
					}
				}
			}
			_ = rc.Flush()
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			_ = rc.Flush()
		}
	}
}

func writeSSE(w http.ResponseWriter, id string, data []byte) error {
	_, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", id, data)
	return err
}

// Lookup reports whether an event is still retained.
func (f *Feed) Lookup(ctx context.Context, p Position) (bool, error) {
	_, ok, err := find(ctx, f.db, p)
	return ok, err
}
