package execution

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/tracing"
)

// Group commit of starts: concurrent Start calls of one process share a
// transaction. A start that finds no group running runs alone (Start's own
// path, four statements); starts that arrive while a group's transaction
// is in flight wait for it, and the next group takes all of them (up to
// maxStartGroup) through the batch path (StartBatchTx): a handful of
// statements and one commit for the whole group, so that under a burst a
// start costs a fraction of a statement and of a durable commit. A start
// with runtime tags or artifacts, or in a traced request, and every start
// of a group whose transaction failed or that came back with an error (a
// missing version, a request id a concurrent start took), goes through
// Start's own path, which answers exactly as an ungrouped start would.
// A group resolves named versions (latest, active, default) before it
// locks the workflows, as starts did before they read the version under
// the lock: a version pushed at that moment may be the one after.

// maxStartGroup bounds the starts of one group's transaction.
const maxStartGroup = 256

// startGroupLeaders is how many groups' transactions run at once: while
// one commits, the next gathers and writes.
const startGroupLeaders = 2

// startGroups gathers concurrent starts.
type startGroups struct {
	mu      sync.Mutex
	waiting []*groupedStart
	leaders int
}

// groupedStart is one start waiting for its group.
type groupedStart struct {
	ctx     context.Context
	req     StartRequest
	n       int64
	name    string
	res     *StartResult
	err     error
	solo    bool // answer through Start's own path
	settled chan struct{}
}

// startGrouped starts req with concurrent starts of this process (see
// above); n and name are its parsed version selector.
func (s *Service) startGrouped(ctx context.Context, req StartRequest, n int64, name string) (*StartResult, error) {
	g := &groupedStart{ctx: ctx, req: req, n: n, name: name, settled: make(chan struct{})}
	s.groups.mu.Lock()
	s.groups.waiting = append(s.groups.waiting, g)
	lead := s.groups.leaders < startGroupLeaders
	if lead {
		s.groups.leaders++
	}
	s.groups.mu.Unlock()
	if lead {
		s.leadGroups(g)
	}
	<-g.settled
	if g.solo {
		return s.startSolo(ctx, req, n, name, nil)
	}
	return g.res, g.err
}

// leadGroups runs groups until own (nil for none) is settled and, then,
// hands the lead to a new goroutine if starts are waiting: a caller leads
// no longer than its own start takes, however long the burst.
func (s *Service) leadGroups(own *groupedStart) {
	for {
		s.groups.mu.Lock()
		ownDone := own != nil && isSettled(own)
		group := s.groups.waiting
		if len(group) > maxStartGroup {
			group = group[:maxStartGroup]
		}
		if len(group) == 0 || ownDone {
			if len(group) > 0 {
				go s.leadGroups(nil)
			} else {
				s.groups.leaders--
			}
			s.groups.mu.Unlock()
			return
		}
		s.groups.waiting = s.groups.waiting[len(group):]
		s.groups.mu.Unlock()
		if len(group) == 1 {
			// Alone: Start's own path, run here so that the starts
			// arriving meanwhile gather for the next group.
			g := group[0]
			g.res, g.err = s.startSolo(g.ctx, g.req, g.n, g.name, nil)
		} else {
			s.runGroup(group)
		}
		for _, g := range group {
			close(g.settled)
		}
	}
}

func isSettled(g *groupedStart) bool {
	select {
	case <-g.settled:
		return true
	default:
		return false
	}
}

// groupVersionsSQL resolves the version selectors of a group: for each
// workflow, its active and latest versions; a workflow that does not exist
// has no row.
const groupVersionsSQL = `SELECT workflow_id, active_version, latest_version FROM workflow WHERE workflow_id = ANY($1::text[])`

// runGroup starts a group in one transaction. A start it cannot answer
// as Start would is marked solo.
func (s *Service) runGroup(group []*groupedStart) {
	ctx := context.WithoutCancel(group[0].ctx) // the group outlives any one caller
	ids := make([]string, 0, len(group))
	for _, g := range group {
		ids = append(ids, g.req.WorkflowID)
	}
	var results []BatchResult
	starts := make([]BatchStart, len(group))
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, groupVersionsSQL, ids)
		if err != nil {
			return fmt.Errorf("resolve the versions of %d starts: %w", len(group), err)
		}
		type versions struct{ active, latest *int64 }
		known := map[string]versions{}
		for rows.Next() {
			var id string
			var v versions
			if err := rows.Scan(&id, &v.active, &v.latest); err != nil {
				rows.Close()
				return fmt.Errorf("resolve the versions of %d starts: %w", len(group), err)
			}
			known[id] = v
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("resolve the versions of %d starts: %w", len(group), err)
		}
		for i, g := range group {
			v := known[g.req.WorkflowID]
			version := g.n
			switch {
			case version > 0:
			case g.name == "latest" && v.latest != nil:
				version = *v.latest
			case g.name == "active" && v.active != nil:
				version = *v.active
			case g.name == "default" && v.active != nil:
				version = *v.active
			case g.name == "default" && v.latest != nil:
				version = *v.latest
			}
			// A version that does not resolve (0) is not found by
			// StartBatchTx; Start answers it.
			starts[i] = BatchStart{WorkflowID: g.req.WorkflowID, Version: version, RequestID: g.req.RequestID,
				Initiator: g.req.Initiator, RunParams: g.req.RunParams}
		}
		results, err = s.StartBatchTx(ctx, tx, starts)
		return err
	})
	if err != nil {
		// A request id a concurrent start took (unique violation), a
		// workflow deleted meanwhile: each start on its own.
		for _, g := range group {
			g.solo = true
		}
		return
	}
	s.AfterBatch(ctx, results)
	for i, g := range group {
		r := results[i]
		switch {
		case r.Err != nil && errors.Is(r.Err, ErrInvalid):
			g.err = r.Err
		case r.Err != nil:
			g.solo = true // not found: Start's own error
		case r.Duplicated:
			g.res, g.err = s.duplicate(g.ctx, g.req.WorkflowID, g.req.RequestID)
		default:
			var requestID *string
			if g.req.RequestID != "" {
				requestID = &g.req.RequestID
			}
			g.res = &StartResult{Instance: &Instance{WorkflowID: r.WorkflowID, InstanceID: r.InstanceID, RunID: r.RunID,
				Version: starts[i].Version, UUID: r.UUID, RequestID: requestID, Status: r.Status, Queued: r.Queued,
				StartTime: r.StartTime, GroupID: r.GroupID, groupID: r.GroupID}}
		}
	}
}

// groupable reports whether a start may share a group's transaction: one
// with runtime tags or artifacts goes alone, and so does one in a traced
// request (its run and start message carry its own trace context, and a
// group's runs share one).
func groupable(ctx context.Context, req StartRequest, artifacts []byte) bool {
	return len(req.RuntimeTags) == 0 && artifacts == nil && tracing.Traceparent(ctx) == ""
}
