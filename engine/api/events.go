package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/instance"
)

// Events feed limits.
const (
	defaultEventPage = 100
	maxEventPage     = 1000
)

func (s *Server) eventRoutes() {
	s.handle("GET /api/v3/events", s.events)
}

// events serves the retained events after a position: a JSON page, or,
// with Accept: text/event-stream, a live stream of Server-Sent Events
// (maestro dev) that resumes after its Last-Event-ID.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Events == nil {
		return notFound("events are not served here")
	}
	q := r.URL.Query()
	var f event.Filter
	for _, v := range q["type"] {
		for _, part := range strings.Split(v, ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			t, err := event.ParseType(part)
			if err != nil {
				return badRequest(fmt.Sprintf("type %q is not an event type; expected one of %s", part, typeNames()))
			}
			f.Types = append(f.Types, t)
		}
	}
	f.WorkflowID = q.Get("workflow_id")
	if f.WorkflowID != "" {
		// The events of the workflow now under this id: not those of an
		// earlier one deleted since (issue 27). A workflow that no longer
		// exists keeps its retained events readable.
		created, err := s.cfg.Definitions.CreatedAt(r.Context(), instance.RootWorkflowID(f.WorkflowID))
		switch {
		case err == nil:
			f.Since = created
		case !errors.Is(err, definition.ErrNotFound):
			return err
		}
	}
	if v := q.Get("workflow_instance_id"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return badRequest("workflow_instance_id must be a positive number, got " + strconv.Quote(v))
		}
		f.InstanceID = n
	}
	after, resume := q.Get("after"), true
	stream := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if stream && after == "" {
		after = r.Header.Get("Last-Event-ID")
	}
	var pos event.Position
	if after == "" {
		resume = false
	} else {
		p, err := event.ParsePosition(after)
		if err != nil {
			return badRequest("after (or Last-Event-ID) must be an event_id, got " + strconv.Quote(after))
		}
		pos = p
	}
	if stream {
		if !s.cfg.Events.Live() {
			return &Error{HTTPStatus: http.StatusNotAcceptable, Code: "NOT_ACCEPTABLE",
				Message: "the live event stream is served by maestro dev; here, page through this endpoint as JSON or subscribe to the SNS events topic"}
		}
		// The stream outlives the server's write timeout.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		return s.cfg.Events.Stream(r.Context(), w, f, pos, resume)
	}
	limit := defaultEventPage
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 || n > maxEventPage {
			return badRequest(fmt.Sprintf("limit must be a number from 1 to %d, got %q", maxEventPage, l))
		}
		limit = n
	}
	page, err := s.cfg.Events.Page(r.Context(), f, pos, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func typeNames() string {
	names := make([]string, 0, 9)
	for _, t := range event.Types() {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}
