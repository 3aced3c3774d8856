package execution

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/run"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A start: Start, from the request to the committed run handed to the
// engine (run.Create), with the checks and inputs it shares with the batch
// path (StartBatchTx). A plain start reads the version (definition.Store)
// and runs run.Create in one transaction; nothing else.

// DefaultTimeout is a run's timeout when its workflow sets none (Maestro's
// 10 days).
const DefaultTimeout = 10 * 24 * time.Hour

// Limits on what a start or restart request may carry, as in Maestro.
const (
	// MaxRequestIDLength bounds a request id in bytes. Maestro's request id
	// is a UUID (36 characters); any string up to this length is accepted.
	MaxRequestIDLength = 256
	// MaxRunParams bounds the number of run params of a start or restart
	// (Maestro's PARAM_MAP_SIZE_LIMIT).
	MaxRunParams = 128
)

// checkRequest refuses a request id or run params over the limits
// (ErrInvalid), before anything is written: an oversized request id would
// otherwise fail in the unique index as a database error.
func checkRequest(requestID string, runParams workflow.Params) error {
	if len(requestID) > MaxRequestIDLength {
		return fmt.Errorf("%w: request_id is %d bytes long; the limit is %d", ErrInvalid, len(requestID), MaxRequestIDLength)
	}
	if !utf8.ValidString(requestID) || strings.ContainsRune(requestID, 0) {
		return fmt.Errorf("%w: request_id is not valid UTF-8 or contains a NUL byte", ErrInvalid)
	}
	if strings.ContainsRune(requestID, utf8.RuneError) {
		// JSON decoding turns every lone surrogate escape (\ud800,
		// \udfff, ...) into U+FFFD: two different ids would become one,
		// and the second start would be taken for a repeat of the first.
		return fmt.Errorf("%w: request_id contains U+FFFD (or a lone surrogate escape, which decodes to it)", ErrInvalid)
	}
	if len(runParams) > MaxRunParams {
		return fmt.Errorf("%w: %d run params; the limit is %d", ErrInvalid, len(runParams), MaxRunParams)
	}
	return nil
}

// StartRequest asks for a new run of a workflow version.
type StartRequest struct {
	WorkflowID string
	// Version is active, latest, default or a number.
	Version   string
	RunParams workflow.Params
	// RequestID makes the start idempotent: a repeat returns the first run.
	RequestID string
	Initiator map[string]any
	// RuntimeTags (Maestro's runtime_tags) are merged into the run's
	// workflow tags (MergeTags) and kept in its run_config.
	RuntimeTags workflow.Tags
	// Artifacts (Maestro's artifacts: a JSON object of artifacts by name)
	// are kept as the run's artifacts; nil or {} for none.
	Artifacts json.RawMessage
	// Authorize, when set, decides whether the caller may start a run of
	// the workflow, given its owner and operators as read under the
	// workflow's lock (run.LockForStart): the API's authorization costs no
	// statement of its own and sees every access change committed before
	// the start. Its error is the start's, and nothing is written.
	Authorize func(owner string, operators []string) error
}

// StartResult is the run a start created, or found for a repeated request.
type StartResult struct {
	// Instance is the created run as the start knows it, without reading
	// it back: its ids, version, uuid, request id, flow group and status
	// (CREATED, or STOPPED when its run strategy dropped it) and whether it
	// was queued, as of the start's commit (AdmitAfterCommit may admit a
	// queued run right after). For a repeated request id it is the first
	// run's row as read.
	Instance   *Instance
	Duplicated bool
}

// errStartRolledBack ends a start's transaction without writing: the
// request id was used already, or the version's row was not yet visible.
var errStartRolledBack = errors.New("start rolled back")

// startAttempts bounds how often a start reads its version again when the
// version it resolved under the lock was pushed after the statement's
// snapshot (or a concurrent start replaced the cached definition).
const startAttempts = 5

// Start creates the run and hands it to the engine (run.Create). A start
// is one transaction: run.LockForStart locks the workflow, allocates the
// instance id, resolves the version (its definition decoded once per
// version, startDefinitions) and finds a repeated request id; run.Create
// admits and inserts the run and enqueues its start message in one more
// statement.
func (s *Service) Start(ctx context.Context, req StartRequest) (*StartResult, error) {
	if err := checkRequest(req.RequestID, req.RunParams); err != nil {
		return nil, err
	}
	sel, err := workflow.ParseVersionSelector(req.Version)
	if err != nil {
		return nil, err
	}
	n, name := sel.N, sel.Name
	artifacts, err := encodeArtifacts(req.Artifacts)
	if err != nil {
		return nil, err
	}
	if s.grouping && groupable(ctx, req, artifacts) {
		return s.startGrouped(ctx, req, n, name)
	}
	return s.startSolo(ctx, req, n, name, artifacts)
}

// startSolo is Start in a transaction of its own.
func (s *Service) startSolo(ctx context.Context, req StartRequest, n int64, name string, artifacts []byte) (*StartResult, error) {
	for range startAttempts {
		res, err := s.startOnce(ctx, req, n, name, artifacts)
		if !errors.Is(err, errStartRolledBack) {
			return res, err
		}
	}
	return nil, fmt.Errorf("start %s: its version %s kept changing: %w", req.WorkflowID, req.Version, ErrConflict)
}

// startOnce is one attempt of Start: errStartRolledBack asks for another.
func (s *Service) startOnce(ctx context.Context, req StartRequest, n int64, name string, artifacts []byte) (*StartResult, error) {
	var (
		created []run.Created
		version int64
		dup     *run.Created
		retry   bool
	)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		lock, err := run.LockForStart(ctx, tx, req.WorkflowID, n, name, s.startDefs.known(req.WorkflowID), req.RequestID)
		if err != nil {
			return err
		}
		if req.Authorize != nil {
			if err := req.Authorize(lock.Owner, workflow.Operators(lock.Operators)); err != nil {
				return err // rolled back: no instance id spent
			}
		}
		if lock.Duplicate != nil {
			dup = lock.Duplicate
			return errStartRolledBack
		}
		if lock.Version == 0 || !lock.Found && lock.Version > lock.LatestVersion {
			return definition.VersionNotFound(req.WorkflowID, n, name, true)
		}
		if !lock.Found {
			retry = true // pushed after this statement's snapshot
			return errStartRolledBack
		}
		def, ok, err := s.startDefs.resolve(req.WorkflowID, lock.Version, lock.Fingerprint, lock.Definition)
		if err != nil {
			return err
		}
		if !ok {
			retry = true
			return errStartRolledBack
		}
		version = lock.Version
		start := run.New{Ref: run.Ref{WorkflowID: req.WorkflowID, InstanceID: lock.InstanceID}, Version: version,
			RequestID: req.RequestID, Workflow: def.wf, GroupCount: s.groupCount,
			Check: func(n *run.New) error { return startInputs(n, req.RunParams, req.Initiator) }}
		if len(req.RuntimeTags) > 0 {
			start.Definition = def.raw
			if err := withRuntimeTags(&start, req.RuntimeTags); err != nil {
				return err
			}
		}
		opt := run.Options{Props: map[string][]byte{req.WorkflowID: lock.Props}, Deduplicated: true}
		if created, err = run.Create(ctx, tx, []run.New{start}, opt); err != nil {
			return err
		}
		if created[0].Queued && testHookQueued != nil {
			testHookQueued()
		}
		if c := created[0]; c.Err == nil && !c.Duplicated && artifacts != nil {
			if _, err := tx.Exec(ctx, sqlSetArtifacts, c.Ref.WorkflowID, c.Ref.InstanceID, c.Ref.RunID, artifacts); err != nil {
				return fmt.Errorf("store the artifacts of %s/%d: %w", c.Ref.WorkflowID, c.Ref.InstanceID, err)
			}
		}
		return created[0].Err
	})
	if dup != nil {
		return s.duplicate(ctx, req.WorkflowID, req.RequestID)
	}
	if retry {
		return nil, errStartRolledBack
	}
	if run.IsDuplicate(err) && req.RequestID != "" {
		// A concurrent start with the same request id won.
		return s.duplicate(ctx, req.WorkflowID, req.RequestID)
	}
	if errors.Is(err, run.ErrWorkflowGone) {
		return nil, definition.VersionNotFound(req.WorkflowID, n, name, false)
	}
	if err != nil {
		return nil, err
	}
	c := created[0]
	run.AdmitAfterCommit(ctx, s.db, created)
	var requestID *string
	if req.RequestID != "" {
		requestID = &req.RequestID
	}
	return &StartResult{Instance: &Instance{WorkflowID: c.Ref.WorkflowID, InstanceID: c.Ref.InstanceID, RunID: c.Ref.RunID,
		Version: version, UUID: c.UUID, RequestID: requestID, Status: c.Status, Queued: c.Queued, StartTime: c.StartTime,
		GroupID: c.GroupID, groupID: c.GroupID}}, nil
}

// duplicate is the answer to a start whose request id an earlier start
// used: that start's run.
func (s *Service) duplicate(ctx context.Context, workflowID, requestID string) (*StartResult, error) {
	inst, err := s.byRequestID(ctx, workflowID, requestID)
	if err != nil {
		return nil, err
	}
	return &StartResult{Instance: inst, Duplicated: true}, nil
}

// testHookQueued, when set, runs inside a start's transaction once its run
// was queued: a test ends a run there to race the start.
var testHookQueued func()

// ManualInitiator is the initiator of a run a caller started or restarted
// by hand (Maestro's MANUAL initiator).
func ManualInitiator(caller string) map[string]any {
	return map[string]any{"type": "MANUAL", "user": caller}
}

// startInputs checks a start's run params against the version's param
// modes (a refusal is ErrInvalid, before anything is written rather than
// failing the run later) and fills in what the run row stores: the encoded
// run params, the initiator (MANUAL when none), the CREATED event and the
// timeout in seconds (the workflow's, else DefaultTimeout).
func startInputs(n *run.New, runParams workflow.Params, initiator map[string]any) error {
	wf := n.Workflow
	if err := checkStartParams(wf, runParams); err != nil {
		return fmt.Errorf("%w: run params: %w", ErrInvalid, err)
	}
	encoded := []byte(`{}`)
	if len(runParams) > 0 {
		var err error
		if encoded, err = json.Marshal(runParams); err != nil {
			return fmt.Errorf("encode run params: %w", err)
		}
	}
	if initiator == nil {
		initiator = map[string]any{"type": "MANUAL"}
	}
	var err error
	if n.Initiator, err = json.Marshal(initiator); err != nil {
		return fmt.Errorf("encode initiator: %w", err)
	}
	timeout := DefaultTimeout
	if wf.Timeout != nil {
		if d, err := wf.Timeout.Resolve(); err == nil && d > 0 {
			timeout = d
		}
	}
	n.RunParams, n.TimeoutSeconds = encoded, int64(timeout/time.Second)
	n.Timeline = instance.StatusChange(string(instance.WorkflowCreated), createdReason(initiator))
	return nil
}

// checkStartParams checks run params against wf's param modes. Without
// run params the answer depends on wf alone: it is kept per decoded
// definition (startDefinitions shares one per version), so that a batch of
// trigger starts does not build every run's default params to throw them
// away.
func checkStartParams(wf *workflow.Workflow, runParams workflow.Params) error {
	if len(runParams) > 0 {
		_, err := params.WorkflowDefs(params.WorkflowInput{Workflow: wf, RunParams: runParams, Phase: params.PhaseStart})
		return err
	}
	noRunParams.mu.Lock()
	err, ok := noRunParams.m[wf]
	noRunParams.mu.Unlock()
	if ok {
		return err
	}
	_, err = params.WorkflowDefs(params.WorkflowInput{Workflow: wf, Phase: params.PhaseStart})
	noRunParams.mu.Lock()
	if len(noRunParams.m) >= maxStartDefinitions {
		clear(noRunParams.m)
	}
	noRunParams.m[wf] = err
	noRunParams.mu.Unlock()
	return err
}

// noRunParams is checkStartParams's answer for starts without run params,
// by definition.
var noRunParams = struct {
	mu sync.Mutex
	m  map[*workflow.Workflow]error
}{m: map[*workflow.Workflow]error{}}

// createdReason is the reason on a new run's CREATED event: for a run a
// trigger started, the initiator's own line, as Maestro writes it.
func createdReason(initiator map[string]any) string {
	typ, _ := initiator["type"].(string)
	if typ == "TIME" || typ == "SIGNAL" {
		if id, ok := initiator["trigger_uuid"].(string); ok {
			return fmt.Sprintf("%s-based trigger runs a new workflow instance by trigger uuid [%s]", typ, id)
		}
	}
	return "run requested"
}

// startDefinitions keeps, per workflow, the decoded definition of the
// version its starts last ran, keyed by the version's fingerprint (the
// sha256 of its canonical JSON, workflow_version.fingerprint): a start
// passes the fingerprint to its first statement (run.LockForStart), which
// sends the definition back only when the version it resolves has another
// one. The definition is thus read and decoded once per version a process
// starts, not once per start. A cached definition is shared by every start
// that uses it and never written to (withRuntimeTags copies it).
type startDefinitions struct {
	mu      sync.Mutex
	entries map[string]*startDefinition
	// decodes counts the definitions decoded, for tests.
	decodes atomic.Int64
}

// startDefinition is one workflow's cached version definition.
type startDefinition struct {
	fingerprint []byte
	raw         []byte
	wf          *workflow.Workflow
}

// maxStartDefinitions bounds the workflows whose definition is kept; past
// it the cache starts over (a start then reads its definition once more).
const maxStartDefinitions = 4096

func newStartDefinitions() *startDefinitions {
	return &startDefinitions{entries: map[string]*startDefinition{}}
}

// known is the fingerprint of the definition cached for workflowID, nil
// when none is.
func (c *startDefinitions) known(workflowID string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[workflowID]; e != nil {
		return e.fingerprint
	}
	return nil
}

// cached is the definition cached for workflowID, nil when none is.
func (c *startDefinitions) cached(workflowID string) *startDefinition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[workflowID]
}

// resolve returns the decoded definition with fingerprint: raw decoded
// and cached when the statement sent it, else the cached one; ok is false
// when it sent none and the cache no longer has that fingerprint (a
// concurrent start replaced it), and the caller reads it again.
func (c *startDefinitions) resolve(workflowID string, version int64, fingerprint, raw []byte) (*startDefinition, bool, error) {
	if raw == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if e := c.entries[workflowID]; e != nil && bytes.Equal(e.fingerprint, fingerprint) {
			return e, true, nil
		}
		return nil, false, nil
	}
	e := &startDefinition{fingerprint: fingerprint, raw: raw, wf: &workflow.Workflow{}}
	if err := json.Unmarshal(raw, e.wf); err != nil {
		return nil, false, fmt.Errorf("decode workflow %s version %d: %w", workflowID, version, err)
	}
	c.decodes.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxStartDefinitions {
		clear(c.entries)
	}
	c.entries[workflowID] = e
	return e, true, nil
}

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
				Initiator: g.req.Initiator, RunParams: g.req.RunParams, Authorize: g.req.Authorize}
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
		var denied *DeniedError
		switch {
		case errors.As(r.Err, &denied):
			g.err = denied.Err
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
