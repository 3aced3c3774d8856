package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/run"
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
	n, name, err := definition.ParseSelector(req.Version)
	if err != nil {
		return nil, err
	}
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

func orEmptyParams(p workflow.Params) workflow.Params {
	if p == nil {
		return workflow.Params{}
	}
	return p
}

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
	if _, err := params.WorkflowDefs(params.WorkflowInput{Workflow: wf, RunParams: runParams, Phase: params.PhaseStart}); err != nil {
		return fmt.Errorf("%w: run params: %w", ErrInvalid, err)
	}
	encoded, err := json.Marshal(orEmptyParams(runParams))
	if err != nil {
		return fmt.Errorf("encode run params: %w", err)
	}
	if initiator == nil {
		initiator = map[string]any{"type": "MANUAL"}
	}
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
