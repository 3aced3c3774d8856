package event

import (
	"context"
	"sync"
	"time"
)

// Rendered is an external event ready to send, with what filtering needs.
type Rendered struct {
	Position
	Meta
	JSON []byte
}

// Hub is the in-process sink of maestro dev: it hands every event it is
// given to the live streams subscribed to it (GET /api/v3/events). A
// subscriber that falls behind is dropped, and resumes from the outbox
// with its last event id.
type Hub struct {
	cluster string
	mu      sync.Mutex
	subs    map[*Subscription]struct{}
}

// NewHub builds a hub; cluster is the cluster_name of its events.
func NewHub(cluster string) *Hub {
	return &Hub{cluster: cluster, subs: map[*Subscription]struct{}{}}
}

// Subscription is one live stream's view of the hub.
type Subscription struct {
	// C delivers the events in position order; it is closed when the
	// subscriber fell behind (or Close was called).
	C    <-chan Rendered
	c    chan Rendered
	hub  *Hub
	once sync.Once
}

// Subscribe starts a subscription holding up to buffer undelivered events.
func (h *Hub) Subscribe(buffer int) *Subscription {
	c := make(chan Rendered, buffer)
	s := &Subscription{C: c, c: c, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Close ends the subscription. Idempotent.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.closeLocked()
}

func (s *Subscription) closeLocked() {
	s.once.Do(func() {
		delete(s.hub.subs, s)
		close(s.c)
	})
}

// Publish hands events to every subscriber; it never fails.
func (h *Hub) Publish(_ context.Context, evs []Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		return nil
	}
	now := time.Now()
	out := make([]Rendered, 0, len(evs))
	for _, e := range evs {
		b, m, err := Render(Wire(e), "", h.cluster, now)
		if err != nil {
			continue // not an event this build knows; nothing can show it
		}
		out = append(out, Rendered{Position: e.Position, Meta: m, JSON: b})
	}
	for s := range h.subs {
		for _, r := range out {
			select {
			case s.c <- r:
			default:
				s.closeLocked()
			}
			if _, live := h.subs[s]; !live {
				break
			}
		}
	}
	return nil
}
