package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/wire"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// This file turns what the stores return into Maestro's response shapes
// (engine/wire). Every handler answers with one of them.

// definitionView is a version as Maestro's WorkflowDefinition.
func definitionView(v *definition.Version) (*wire.WorkflowDefinition, error) {
	// Re-encode from the model: the stored JSONB has lost the field order.
	wf, err := wire.Marshal(&v.Workflow)
	if err != nil {
		return nil, fmt.Errorf("encode workflow %s version %d: %w", v.WorkflowID, v.Version, err)
	}
	meta := &wire.Metadata{WorkflowID: v.WorkflowID, VersionID: v.Version, CreateTime: wire.Millis(v.CreatedAt),
		VersionAuthor: v.CreatedBy}
	if len(v.Metadata) > 2 {
		var m definition.VersionMetadata
		if err := json.Unmarshal(v.Metadata, &m); err != nil {
			return nil, fmt.Errorf("decode workflow %s version %d metadata: %w", v.WorkflowID, v.Version, err)
		}
		if m.GitInfo != nil {
			if meta.GitInfo, err = wire.Marshal(m.GitInfo); err != nil {
				return nil, err
			}
		}
		meta.Extra = m.Extra
	}
	snap, err := snapshotView(v.Snapshot)
	if err != nil {
		return nil, err
	}
	d := &wire.WorkflowDefinition{
		PropertiesSnapshot: snap, Metadata: meta, Workflow: wf, IsActive: v.Active,
		IsLatest: v.Version == v.LatestVersion, ModifyTime: wire.Millis(v.ModifyTime),
	}
	d.IsDefault = v.Active || (v.ActiveVersion == nil && d.IsLatest)
	if v.ActivateTime != nil {
		d.ActivateTime, d.ActivatedBy = wire.MillisPtr(v.ActivateTime), v.ActivatedBy
	}
	return d, nil
}

// snapshotView is a properties snapshot as Maestro's PropertiesSnapshot:
// the properties inline, run_strategy always an object, owner always set.
func snapshotView(s *definition.Snapshot) (*wire.PropertiesSnapshot, error) {
	if s == nil {
		return nil, nil
	}
	props := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(s.Properties)) > 0 {
		if err := json.Unmarshal(s.Properties, &props); err != nil {
			return nil, fmt.Errorf("decode workflow %s properties snapshot %d: %w", s.WorkflowID, s.Version, err)
		}
	}
	if rs, ok := props["run_strategy"]; ok {
		props["run_strategy"] = runStrategyObject(rs)
	}
	if _, ok := props["owner"]; !ok && s.Owner != "" {
		props["owner"], _ = wire.Marshal(s.Owner)
	}
	return &wire.PropertiesSnapshot{WorkflowID: s.WorkflowID, CreateTime: wire.Millis(s.CreateTime), Author: s.Author,
		SnapshotVersion: s.Version, Properties: props}, nil
}

// runStrategyObject writes a run strategy given as a rule name ("parallel")
// or a number (a PARALLEL concurrency) as Maestro's object form.
func runStrategyObject(raw json.RawMessage) json.RawMessage {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		out, _ := wire.Marshal(map[string]string{"rule": strings.ToUpper(name)})
		return out
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		out, _ := wire.Marshal(map[string]any{"rule": workflow.RunStrategyParallel, "workflow_concurrency": n})
		return out
	}
	return raw
}

// ordinals numbers a workflow's top-level steps from 1 in definition order
// (Maestro's step_instance_id).
func ordinals(wf *workflow.Workflow) map[string]int64 {
	out := make(map[string]int64, len(wf.Steps))
	for i := range wf.Steps {
		out[wf.Steps[i].ID()] = int64(i + 1)
	}
	return out
}

// decodeRuntime decodes a run's runtime workflow; nil when it is absent or
// does not decode (lists omit it).
func decodeRuntime(raw json.RawMessage) *workflow.Workflow {
	if len(raw) == 0 {
		return nil
	}
	var wf workflow.Workflow
	if err := json.Unmarshal(raw, &wf); err != nil {
		return nil
	}
	return &wf
}

// instanceView is a run as Maestro's WorkflowInstance.
func instanceView(inst *execution.Instance) (*wire.WorkflowInstance, error) {
	wf := decodeRuntime(inst.Definition)
	v := &wire.WorkflowInstance{
		WorkflowID: inst.WorkflowID, InstanceID: inst.InstanceID, RunID: inst.RunID, UUID: inst.UUID,
		CorrelationID: fmt.Sprintf("%s:%d:%d", inst.WorkflowID, inst.InstanceID, inst.RunID),
		VersionID:     inst.Version, GroupInfo: int64(inst.GroupID), RunConfig: runConfigView(inst.RunConfig),
		RunParams: inst.RunParams, Initiator: initiatorView(inst.Initiator), Status: string(inst.Status),
		CreateTime: wire.Millis(inst.CreateTime), StartTime: wire.MillisPtr(inst.StartTime),
		EndTime: wire.MillisPtr(inst.EndTime), ModifyTime: wire.Millis(inst.ModifyTime), Timeline: inst.Timeline,
		RequestID: inst.RequestID, Queued: inst.Queued, Artifacts: inst.Artifacts,
		// Maestro's request_time is when the start was asked for: the
		// run's create time here (the start writes the run at once).
		RequestTime: new(wire.Millis(inst.CreateTime)),
	}
	if inst.TimeoutSeconds > 0 {
		ms := inst.TimeoutSeconds * 1000
		v.TimeoutInMillis = &ms
	}
	if inst.StartTime != nil { // an engine has started the run's execution
		v.ExecutionID = &v.UUID
	}
	evaluated := wire.MillisPtr(inst.StartTime)
	if evaluated == nil {
		evaluated = &v.CreateTime
	}
	var defs workflow.Params
	if wf != nil {
		v.RuntimeWorkflow = inst.Definition
		v.RuntimeDAG = runtimeDAG(wf)
		defs = wf.Params
	}
	v.Params = paramsView(inst.Params, defs, evaluated)
	if ov := inst.RuntimeOverview; ov != nil {
		v.RuntimeOverview = overviewView(ov, wf)
	}
	if ai := inst.AggregatedInfo; ai != nil {
		v.AggregatedInfo = aggregatedView(ai)
	}
	return v, nil
}

// runConfigView writes a run config as Maestro's RunConfig: a start's
// policy is START_FRESH_NEW_RUN.
func runConfigView(raw json.RawMessage) json.RawMessage {
	var cfg map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &cfg) != nil || len(cfg) == 0 {
		return nil
	}
	if string(cfg["policy"]) == `"START"` {
		cfg["policy"] = json.RawMessage(`"START_FRESH_NEW_RUN"`)
	}
	out, err := wire.Marshal(cfg)
	if err != nil {
		return raw
	}
	return out
}

// initiatorView writes an initiator as Maestro's: an upstream initiator
// (SUBWORKFLOW, FOREACH, WHILE) names its parent run in ancestors.
func initiatorView(raw json.RawMessage) json.RawMessage {
	var ini map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &ini) != nil {
		return raw
	}
	parent, ok := ini["parent"]
	if !ok {
		return raw
	}
	var p struct {
		WorkflowID string `json:"workflow_id"`
		InstanceID int64  `json:"instance_id"`
		RunID      int64  `json:"run_id"`
		StepID     string `json:"step_id"`
		AttemptID  int64  `json:"attempt_id"`
	}
	if json.Unmarshal(parent, &p) != nil {
		return raw
	}
	ini["ancestors"], _ = wire.Marshal([]wire.UpstreamInfo{{WorkflowID: p.WorkflowID, InstanceID: p.InstanceID,
		RunID: p.RunID, StepID: p.StepID, StepAttemptID: p.AttemptID}})
	out, err := wire.Marshal(ini)
	if err != nil {
		return raw
	}
	return out
}

// runtimeDAG is Maestro's runtime_dag: each top-level step's predecessors
// and successors with their conditions.
func runtimeDAG(wf *workflow.Workflow) json.RawMessage {
	dag, err := workflow.BuildDAG(wf.Steps)
	if err != nil {
		return nil
	}
	type transition struct {
		Predecessors []string          `json:"predecessors"`
		Successors   map[string]string `json:"successors"`
	}
	out := make(map[string]transition, dag.Len())
	for _, id := range dag.IDs() {
		t := transition{Predecessors: dag.Predecessors(id), Successors: dag.Successors(id)}
		if t.Predecessors == nil {
			t.Predecessors = []string{}
		}
		if t.Successors == nil {
			t.Successors = map[string]string{}
		}
		out[id] = t
	}
	raw, err := wire.Marshal(out)
	if err != nil {
		return nil
	}
	return raw
}

// overviewView is Maestro's runtime overview: each status with its step
// count and [ordinal, start, end] of each step (when the definition is
// known), and the rollup.
func overviewView(ov *execution.RuntimeOverview, wf *workflow.Workflow) *wire.RuntimeOverview {
	out := &wire.RuntimeOverview{TotalStepCount: int64(ov.TotalStepCount), StepOverview: map[string]*wire.StepStatusSummary{}}
	for st, n := range ov.StepOverview {
		out.StepOverview[string(st)] = &wire.StepStatusSummary{Count: n}
	}
	if wf != nil {
		ord := ordinals(wf)
		for _, st := range ov.Steps {
			n, ok := ord[st.StepID]
			if !ok {
				continue
			}
			sum := out.StepOverview[string(st.Status)]
			sum.Steps = append(sum.Steps, []*int64{&n, wire.MillisPtr(st.StartTime), wire.MillisPtr(st.EndTime)})
		}
		for _, sum := range out.StepOverview {
			slices.SortFunc(sum.Steps, func(a, b []*int64) int { return int(*a[0] - *b[0]) })
		}
	}
	if ov.RollupOverview != nil {
		out.RollupOverview = rollupView(ov.RollupOverview)
	}
	return out
}

// rollupView is Maestro's rollup overview: references keyed by
// "workflow_id:run_id", each "instance_id:step_id:attempt_id".
func rollupView(r *execution.RollupOverview) *wire.RollupOverview {
	out := &wire.RollupOverview{TotalLeafCount: r.TotalLeafCount, Overview: make(map[string]*wire.CountReference, len(r.Overview))}
	for st, c := range r.Overview {
		cr := &wire.CountReference{Count: c.Count}
		for _, ref := range c.Refs {
			if cr.Ref == nil {
				cr.Ref = map[string][]string{}
			}
			key := fmt.Sprintf("%s:%d", ref.WorkflowID, ref.RunID)
			cr.Ref[key] = append(cr.Ref[key], fmt.Sprintf("%d:%s:%d", ref.InstanceID, ref.StepID, ref.AttemptID))
		}
		out.Overview[string(st)] = cr
	}
	return out
}

// aggregatedView is Maestro's aggregated info.
func aggregatedView(ai *execution.AggregatedInfo) *wire.AggregatedInfo {
	out := &wire.AggregatedInfo{WorkflowInstanceStatus: string(ai.WorkflowInstanceStatus),
		StepAggregatedViews: make(map[string]wire.StepAggregatedView, len(ai.StepAggregatedViews))}
	for id, v := range ai.StepAggregatedViews {
		sv := wire.StepAggregatedView{Status: string(v.Status), StartTime: wire.MillisPtr(v.StartTime), EndTime: wire.MillisPtr(v.EndTime)}
		if v.WorkflowRunID > 0 {
			sv.WorkflowRunID = &v.WorkflowRunID
		}
		if v.StepAttemptID > 0 {
			sv.StepAttemptID = &v.StepAttemptID
		}
		out.StepAggregatedViews[id] = sv
	}
	return out
}

// paramsView writes evaluated params ({"n": {"type", "value"}}) as
// Maestro's evaluated Parameters: evaluated_result and evaluated_time
// added, and the definition's expression, mode, validator and tags when
// defs names the param. A param defined by an expression shows the
// expression instead of a value, as in Maestro.
func paramsView(raw json.RawMessage, defs workflow.Params, evaluatedAt *int64) json.RawMessage {
	var vals map[string]map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &vals) != nil {
		return raw
	}
	var at json.RawMessage
	if evaluatedAt != nil {
		at, _ = wire.Marshal(*evaluatedAt)
	}
	for name, p := range vals {
		if p == nil {
			continue
		}
		if v, ok := p["value"]; ok {
			p["evaluated_result"] = v
		}
		if at != nil {
			p["evaluated_time"] = at
		}
		def, ok := defs[name]
		if !ok {
			continue
		}
		if def.Expression != nil {
			p["expression"], _ = wire.Marshal(*def.Expression)
			delete(p, "value")
		}
		if def.Mode != "" {
			p["mode"], _ = wire.Marshal(def.Mode)
		}
		if def.Validator != "" {
			p["validator"], _ = wire.Marshal(def.Validator)
		}
		if len(def.Tags) > 0 {
			p["tags"], _ = wire.Marshal(def.Tags)
		}
	}
	out, err := wire.Marshal(vals)
	if err != nil {
		return raw
	}
	return out
}

// stepContext is what step views share: the run the attempts belong to,
// its runtime workflow and the workflow's owner.
type stepContext struct {
	run   *execution.Instance
	wf    *workflow.Workflow
	owner string
	ord   map[string]int64
	// signalOutputs are the output signals of the run's attempts by
	// outputKey, once loaded (Server.loadSignalOutputs).
	signalOutputs map[string]*wire.SignalOutputs
}

func newStepContext(run *execution.Instance, owner string) *stepContext {
	c := &stepContext{run: run, owner: owner, wf: decodeRuntime(run.Definition)}
	if c.wf != nil {
		c.ord = ordinals(c.wf)
	}
	return c
}

// node finds a step of the run's workflow by id, nested steps included.
func (c *stepContext) node(id string) *workflow.StepNode {
	if c.wf == nil {
		return nil
	}
	var found *workflow.StepNode
	workflow.WalkSteps(c.wf.Steps, func(_ string, n *workflow.StepNode, depth int) bool {
		if found == nil && depth == 0 && n.ID() == id {
			found = n
		}
		return false
	})
	return found
}

// stepView is an attempt as Maestro's StepInstance.
func (c *stepContext) stepView(a *execution.StepAttempt) *wire.StepInstance {
	v := &wire.StepInstance{
		WorkflowID: a.WorkflowID, InstanceID: a.InstanceID, RunID: a.RunID, StepID: a.StepID, AttemptID: a.AttemptID,
		WorkflowUUID: c.run.UUID, StepUUID: a.UUID,
		CorrelationID:  fmt.Sprintf("%s:%d:%d", c.run.WorkflowID, c.run.InstanceID, c.run.RunID),
		StepInstanceID: c.ord[a.StepID], VersionID: c.run.Version, GroupInfo: int64(c.run.GroupID), Owner: c.owner,
		Outputs: a.Outputs, Timeline: a.Timeline, StepType: a.Type, DetailOmitted: a.DetailOmitted,
		RuntimeState: runtimeStateView(a), SignalOutputs: c.signalOutputs[outputKey(a.StepID, a.AttemptID)],
	}
	var defs workflow.Params
	if n := c.node(a.StepID); n != nil {
		v.Definition, _ = wire.Marshal(n)
		common := n.Common()
		defs = common.Params
		v.Tags = json.RawMessage("[]") // Maestro writes a step's tags and transition even when empty
		if len(common.Tags) > 0 {
			v.Tags, _ = wire.Marshal(common.Tags)
		}
		v.Transition = transitionView(common.Transition)
		v.TimeoutInMillis = stepTimeoutMillis(common.Timeout, c.run.Params, a.Params)
	}
	v.Params = paramsView(a.Params, defs, v.RuntimeState.EvaluateParamTime)
	if len(a.Artifacts) > 2 {
		v.Artifacts = a.Artifacts
	}
	v.StepRetry = retryView(a.RetryInfo)
	return v
}

// stepTimeoutMillis is Maestro's StepInstance.timeout_in_millis, the
// step's effective timeout: its own timeout, one written with params
// ("${hours}h") resolved from the attempt's params and the run's as the
// engine resolves it; nil when the step has none (Maestro then applies its
// default limit and leaves the field out) or it cannot be resolved yet
// (the attempt's params are not evaluated).
func stepTimeoutMillis(t *workflow.Duration, runParams, stepParams json.RawMessage) *int64 {
	if t == nil {
		return nil
	}
	d, err := t.Resolve()
	if errors.Is(err, workflow.ErrNeedsParams) {
		var run, step params.Values
		if len(stepParams) == 0 || json.Unmarshal(stepParams, &step) != nil || step == nil {
			return nil
		}
		if len(runParams) > 0 && json.Unmarshal(runParams, &run) != nil {
			return nil
		}
		vals := run.Plain()
		maps.Copy(vals, step.Plain())
		s, ierr := params.Interpolate(t.Text, vals)
		if ierr != nil {
			return nil
		}
		d, err = workflow.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// transitionView is Maestro's StepInstanceTransition: each successor's
// condition as a BOOLEAN expression.
func transitionView(t *workflow.Transition) json.RawMessage {
	if t == nil || len(t.Successors) == 0 {
		return json.RawMessage(`{"successors":{}}`)
	}
	type cond struct {
		Expression string `json:"expression"`
		Type       string `json:"type"`
	}
	succ := make(map[string]cond, len(t.Successors))
	for id, c := range t.Successors {
		succ[id] = cond{Expression: c, Type: string(workflow.ParamTypeBoolean)}
	}
	out, _ := wire.Marshal(map[string]any{"successors": succ})
	return out
}

// statusTimes names the StepRuntimeState field each status's entry time
// fills.
var statusTimes = map[instance.StepStatus]func(*wire.StepRuntime) **int64{
	instance.StepCreated:           func(s *wire.StepRuntime) **int64 { return &s.CreateTime },
	instance.StepInitialized:       func(s *wire.StepRuntime) **int64 { return &s.InitializeTime },
	instance.StepPaused:            func(s *wire.StepRuntime) **int64 { return &s.PauseTime },
	instance.StepWaitingForSignals: func(s *wire.StepRuntime) **int64 { return &s.WaitSignalTime },
	instance.StepEvaluatingParams:  func(s *wire.StepRuntime) **int64 { return &s.EvaluateParamTime },
	instance.StepWaitingForPermits: func(s *wire.StepRuntime) **int64 { return &s.WaitPermitTime },
	instance.StepStarting:          func(s *wire.StepRuntime) **int64 { return &s.StartTime },
	instance.StepRunning:           func(s *wire.StepRuntime) **int64 { return &s.ExecuteTime },
	instance.StepFinishing:         func(s *wire.StepRuntime) **int64 { return &s.FinishTime },
}

// runtimeStateView is Maestro's StepRuntimeState of an attempt, from the
// status events of its timeline, with the runtime's own state (data,
// message, retry_at) beside it.
func runtimeStateView(a *execution.StepAttempt) *wire.StepRuntime {
	rs := &wire.StepRuntime{Status: string(a.Status), ModifyTime: wire.MillisPtr(&a.ModifyTime)}
	var events []instance.TimelineEvent
	_ = json.Unmarshal(a.Timeline, &events) // a timeline left out of a long list has no events
	for _, e := range events {
		if e.Type != wire.EventStatus {
			continue
		}
		ts := e.Timestamp
		st := instance.StepStatus(e.Status)
		if f, ok := statusTimes[st]; ok {
			if p := f(rs); *p == nil {
				*p = &ts
			}
		} else if st.IsTerminal() {
			rs.EndTime = &ts
		}
	}
	if rs.CreateTime == nil {
		rs.CreateTime = wire.MillisPtr(&a.CreateTime)
	}
	if rs.StartTime == nil {
		rs.StartTime = wire.MillisPtr(a.StartTime)
	}
	if rs.EndTime == nil {
		rs.EndTime = wire.MillisPtr(a.EndTime)
	}
	if rs.PauseTime == nil {
		// Maestro's steps all pass PAUSED (its breakpoint check) on the
		// way from INITIALIZED; here a step enters PAUSED only at a
		// breakpoint, and one that went on passed the check when it
		// entered its next status.
		for _, next := range []*int64{rs.WaitSignalTime, rs.EvaluateParamTime, rs.WaitPermitTime, rs.StartTime} {
			if next != nil {
				rs.PauseTime = next
				break
			}
		}
	}
	var own struct {
		Data    json.RawMessage `json:"data"`
		Message string          `json:"message"`
		RetryAt *time.Time      `json:"retry_at"`
	}
	if len(a.RuntimeState) > 0 && json.Unmarshal(a.RuntimeState, &own) == nil {
		rs.Data, rs.Message, rs.RetryAt = own.Data, own.Message, wire.MillisPtr(own.RetryAt)
	}
	return rs
}

// retryView is Maestro's StepRetry, its backoff in Maestro's
// retry_policy.backoff shape.
func retryView(raw json.RawMessage) *wire.StepRetry {
	var r instance.RetryInfo
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil {
		return nil
	}
	b := r.Backoff
	typ := workflow.BackoffFixed
	if b.Exponential {
		typ = workflow.BackoffExponential
	}
	backoff := map[string]any{"type": typ,
		"error_retry_backoff_in_secs": b.ErrorBackoffSecs, "platform_retry_backoff_in_secs": b.PlatformBackoffSecs,
		"timeout_retry_backoff_in_secs": b.TimeoutBackoffSecs}
	if b.Exponential {
		maps.Copy(backoff, map[string]any{
			"error_retry_exponent": b.ErrorExponent, "error_retry_limit_in_secs": b.ErrorLimitSecs,
			"platform_retry_exponent": b.PlatformExponent, "platform_retry_limit_in_secs": b.PlatformLimitSecs,
			"timeout_retry_exponent": b.TimeoutExponent, "timeout_retry_limit_in_secs": b.TimeoutLimitSecs})
	}
	out := &wire.StepRetry{ErrorRetries: r.ErrorRetries, ErrorRetryLimit: r.ErrorRetryLimit,
		PlatformRetries: r.PlatformRetries, PlatformRetryLimit: r.PlatformRetryLimit,
		TimeoutRetries: r.TimeoutRetries, TimeoutRetryLimit: r.TimeoutRetryLimit,
		ManualRetries: r.ManualRetries, Retryable: r.Retryable}
	out.Backoff, _ = wire.Marshal(backoff)
	return out
}
