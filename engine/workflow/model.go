package workflow

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Definition is a workflow create request: the properties kept across versions, the versioned
// workflow, and whether the new version becomes the active one. As in Maestro, the request may
// carry the version's git_info and any other top-level field (source, manifest, api_version,
// dsl_*, ...): they are the version's metadata, stored and returned with it.
type Definition struct {
	Properties *Properties `json:"properties,omitempty"`
	Workflow   Workflow    `json:"workflow"`
	IsActive   *bool       `json:"is_active,omitempty"`
	GitInfo    *GitInfo    `json:"git_info,omitempty"`
	// Extra holds the request's other top-level fields, as Maestro's
	// metadata extra info.
	Extra map[string]json.RawMessage `json:"-" wf:"extra"`
}

// MarshalJSON writes the declared fields and then the extra ones.
func (d Definition) MarshalJSON() ([]byte, error) {
	type plain Definition
	return marshalWithExtra(plain(d), d.Extra)
}

// GitInfo is where a version's source came from, as Maestro's GitInfo.
type GitInfo struct {
	Origin             *string `json:"origin,omitzero"`
	Branch             *string `json:"branch,omitzero"`
	SHA                *string `json:"sha,omitzero"`
	Path               *string `json:"path,omitzero"`
	Author             *string `json:"author,omitzero"`
	Timestamp          *int64  `json:"timestamp,omitzero"`
	UncommittedChanges *bool   `json:"uncommitted_changes,omitzero"`
}

// ReservedMetadataFields are the metadata fields Maestro sets itself: a
// push may not give them as extra fields.
var ReservedMetadataFields = []string{"workflow_id", "workflow_version_id", "version_author", "create_time"}

// UnmarshalJSON decodes strictly; see DecodeJSON.
func (d *Definition) UnmarshalJSON(data []byte) error {
	dd, err := DecodeJSON(data)
	if err != nil {
		return err
	}
	*d = *dd
	return nil
}

// Workflow is the versioned part of a definition.
type Workflow struct {
	ID                      string          `json:"id"`
	Name                    string          `json:"name,omitzero"`
	Description             string          `json:"description,omitzero"`
	Tags                    Tags            `json:"tags,omitzero"`
	Timeout                 *Duration       `json:"timeout,omitzero"`
	TimeTriggers            []TimeTrigger   `json:"time_triggers,omitzero"`
	SignalTriggers          []SignalTrigger `json:"signal_triggers,omitzero"`
	Criticality             Criticality     `json:"criticality,omitzero"`
	InstanceStepConcurrency *int64          `json:"instance_step_concurrency,omitzero"`
	Params                  Params          `json:"params,omitzero"`
	Steps                   []StepNode      `json:"steps"`
}

// UnmarshalJSON decodes strictly.
func (w *Workflow) UnmarshalJSON(data []byte) error { return decodeStrict(data, w, "") }

// NameOrID returns the name, or the id when the name is unset.
func (w *Workflow) NameOrID() string {
	if w.Name != "" {
		return w.Name
	}
	return w.ID
}

// AllStepIDs returns the ids of all steps, including those nested in foreach and while blocks,
// depth first in definition order.
func (w *Workflow) AllStepIDs() []string {
	var out []string
	WalkSteps(w.Steps, func(_ string, n *StepNode, _ int) bool {
		out = append(out, n.ID())
		return true
	})
	return out
}

// WalkSteps calls fn for every step node depth first, with its path relative to the list
// ("[0]", "[1].foreach.steps[0]", ...) and its loop nesting depth (0 for the top level). When fn
// returns false the node's nested steps are skipped.
func WalkSteps(steps []StepNode, fn func(path string, n *StepNode, depth int) bool) {
	walkSteps(steps, "", 0, fn)
}

func walkSteps(steps []StepNode, path string, depth int, fn func(string, *StepNode, int) bool) {
	for i := range steps {
		p := joinIndex(path, i)
		n := &steps[i]
		if !fn(p, n, depth) {
			continue
		}
		if inner, kind := n.Children(); inner != nil {
			walkSteps(inner, p+"."+string(kind)+".steps", depth+1, fn)
		}
	}
}

// StepNode is one entry of a steps list: a wrapper object with exactly one of the four kinds.
type StepNode struct {
	Step        *Step        `json:"step,omitempty"`
	Subworkflow *Subworkflow `json:"subworkflow,omitempty"`
	Foreach     *Foreach     `json:"foreach,omitempty"`
	While       *While       `json:"while,omitempty"`
}

// UnmarshalJSON decodes strictly.
func (n *StepNode) UnmarshalJSON(data []byte) error { return decodeStrict(data, n, "") }

// Kind returns which wrapper is set, or "" when none is.
func (n *StepNode) Kind() StepKind {
	switch {
	case n.Step != nil:
		return StepKindStep
	case n.Subworkflow != nil:
		return StepKindSubworkflow
	case n.Foreach != nil:
		return StepKindForeach
	case n.While != nil:
		return StepKindWhile
	}
	return ""
}

// Common returns the fields every kind shares, or nil when no wrapper is set.
func (n *StepNode) Common() *StepCommon {
	switch {
	case n.Step != nil:
		return &n.Step.StepCommon
	case n.Subworkflow != nil:
		return &n.Subworkflow.StepCommon
	case n.Foreach != nil:
		return &n.Foreach.StepCommon
	case n.While != nil:
		return &n.While.StepCommon
	}
	return nil
}

// ID returns the step id, or "" when no wrapper is set.
func (n *StepNode) ID() string {
	if c := n.Common(); c != nil {
		return c.ID
	}
	return ""
}

// Type returns the step type: the declared type of a typed step, or the kind for the others
// ("subworkflow", "foreach", "while").
func (n *StepNode) Type() StepType {
	if n.Step != nil {
		return n.Step.Type
	}
	return StepType(n.Kind())
}

// RetryPolicy returns the retry policy of a typed step; other kinds are not retried.
func (n *StepNode) RetryPolicy() *RetryPolicy {
	if n.Step != nil {
		return n.Step.RetryPolicy
	}
	return nil
}

// Children returns the nested steps of a foreach or while step with the kind, else nil.
func (n *StepNode) Children() ([]StepNode, StepKind) {
	switch {
	case n.Foreach != nil:
		return n.Foreach.Steps, StepKindForeach
	case n.While != nil:
		return n.While.Steps, StepKindWhile
	}
	return nil, ""
}

func (n *StepNode) postBind(b *binder, node *node, path string) {
	count := 0
	for _, set := range []bool{n.Step != nil, n.Subworkflow != nil, n.Foreach != nil, n.While != nil} {
		if set {
			count++
		}
	}
	switch {
	case count == 0 && len(node.keys) == 0:
		b.add(path, "a step must be one of step, subworkflow, foreach or while"+node.pos())
	case count > 1:
		b.add(path, "a step wrapper must hold exactly one of step, subworkflow, foreach or while, got "+
			strings.Join(node.keys, ", ")+node.pos())
	}
}

// StepCommon holds the fields shared by all step kinds.
type StepCommon struct {
	ID                 string             `json:"id"`
	Name               string             `json:"name,omitzero"`
	Description        string             `json:"description,omitzero"`
	Transition         *Transition        `json:"transition,omitzero"`
	FailureMode        FailureMode        `json:"failure_mode,omitzero"`
	Tags               Tags               `json:"tags,omitzero"`
	Timeout            *Duration          `json:"timeout,omitzero"`
	SignalDependencies []SignalDependency `json:"signal_dependencies,omitzero"`
	SignalOutputs      []SignalOutput     `json:"signal_outputs,omitzero"`
	Params             Params             `json:"params,omitzero"`
}

// EffectiveFailureMode returns the failure mode, or DefaultFailureMode when unset.
func (c *StepCommon) EffectiveFailureMode() FailureMode {
	if c.FailureMode == "" {
		return DefaultFailureMode
	}
	return c.FailureMode
}

// Successors returns the outgoing edges (successor id to SEL condition); nil when none.
func (c *StepCommon) Successors() map[string]string {
	if c.Transition == nil {
		return nil
	}
	return c.Transition.Successors
}

// Transition lists the steps that follow a step and the SEL condition guarding each edge.
// Predecessors is optional; when given it must match the DAG.
type Transition struct {
	Predecessors []string   `json:"predecessors,omitzero"`
	Successors   Successors `json:"successors,omitzero"`
}

// Successors maps each successor step id to its condition, a SEL
// expression. As in Maestro, a condition may also be given as a JSON
// boolean (true or false), kept as the expression "true" or "false".
type Successors map[string]string

func (s *Successors) bindNode(b *binder, n *node, path string) {
	if !b.expect(n, kindObject, path) {
		return
	}
	out := make(Successors, len(n.keys))
	for i, k := range n.keys {
		switch v := n.vals[i]; v.kind {
		case kindString:
			out[k] = v.text
		case kindBool:
			out[k] = strconv.FormatBool(v.b)
		default:
			b.addf(joinKey(path, k), "expected a string or a boolean, got %s%s", v.kind, v.pos())
		}
	}
	*s = out
}

// Step is a typed step run by a step runtime (NoOp, Sleep, Http, ...). Fields the type defines
// for itself (for example Sleep's sleep_seconds) are kept in Config and written back inline;
// the validator checks them against the type's schema.
type Step struct {
	StepCommon
	Type        StepType                   `json:"type"`
	SubType     string                     `json:"sub_type,omitzero"`
	RetryPolicy *RetryPolicy               `json:"retry_policy,omitzero"`
	Config      map[string]json.RawMessage `json:"-" wf:"extra"`
}

// MarshalJSON writes the step in Maestro's field order with its type-specific fields inline.
func (s Step) MarshalJSON() ([]byte, error) {
	ordered := struct {
		ID                 string             `json:"id"`
		Name               string             `json:"name,omitzero"`
		Description        string             `json:"description,omitzero"`
		Transition         *Transition        `json:"transition,omitzero"`
		Type               StepType           `json:"type"`
		SubType            string             `json:"sub_type,omitzero"`
		FailureMode        FailureMode        `json:"failure_mode,omitzero"`
		RetryPolicy        *RetryPolicy       `json:"retry_policy,omitzero"`
		Tags               Tags               `json:"tags,omitzero"`
		Timeout            *Duration          `json:"timeout,omitzero"`
		SignalDependencies []SignalDependency `json:"signal_dependencies,omitzero"`
		SignalOutputs      []SignalOutput     `json:"signal_outputs,omitzero"`
		Params             Params             `json:"params,omitzero"`
	}{
		s.ID, s.Name, s.Description, s.Transition, s.Type, s.SubType, s.FailureMode, s.RetryPolicy, s.Tags,
		s.Timeout, s.SignalDependencies, s.SignalOutputs, s.Params,
	}
	return marshalWithExtra(ordered, s.Config)
}

// ConfigKeys returns the type-specific field names in sorted order.
func (s *Step) ConfigKeys() []string { return slices.Sorted(maps.Keys(s.Config)) }

// Subworkflow runs another workflow, named by the subworkflow_id parameter (and optionally
// subworkflow_version), as a step.
type Subworkflow struct {
	StepCommon
	Sync           *bool `json:"sync,omitzero"`            // wait for the child; default true
	ExplicitParams *bool `json:"explicit_params,omitzero"` // pass only explicit params; default false
}

// Foreach runs its steps once per combination of the loop_params parameter's values.
type Foreach struct {
	StepCommon
	Concurrency    *int64     `json:"concurrency,omitzero"`
	StrictOrdering *bool      `json:"strict_ordering,omitzero"`
	Steps          []StepNode `json:"steps"`
}

// While runs its steps again and again as long as Condition (SEL) is true.
type While struct {
	StepCommon
	Condition string     `json:"condition"`
	Steps     []StepNode `json:"steps"`
}

// Parameter names with a meaning for particular step kinds.
const (
	ParamLoopParams         = "loop_params"
	ParamLoopIndex          = "loop_index"
	ParamSubworkflowID      = "subworkflow_id"
	ParamSubworkflowVersion = "subworkflow_version"
)

// RetryPolicy sets how often a failed typed step is retried and how long to wait in between.
// Every number may also be a parameter reference string.
type RetryPolicy struct {
	ErrorRetryLimit    *ParsableLong `json:"error_retry_limit,omitzero"`
	PlatformRetryLimit *ParsableLong `json:"platform_retry_limit,omitzero"`
	TimeoutRetryLimit  *ParsableLong `json:"timeout_retry_limit,omitzero"`
	Backoff            *Backoff      `json:"backoff,omitzero"`
}

// Retry defaults, as in Maestro.
const (
	DefaultErrorRetryLimit    = 2
	DefaultPlatformRetryLimit = 10
	DefaultTimeoutRetryLimit  = 0
	MaxRetryLimit             = 99
	MaxRetryBackoffSeconds    = 24 * 3600
)

// Backoff sets the delays between retries. FIXED_BACKOFF uses only the *_backoff_in_secs
// fields; EXPONENTIAL_BACKOFF waits backoff * exponent^retries, capped at *_limit_in_secs.
type Backoff struct {
	Type                       BackoffType   `json:"type"`
	ErrorRetryBackoffInSecs    *ParsableLong `json:"error_retry_backoff_in_secs,omitzero"`
	ErrorRetryExponent         *ParsableLong `json:"error_retry_exponent,omitzero"`
	ErrorRetryLimitInSecs      *ParsableLong `json:"error_retry_limit_in_secs,omitzero"`
	PlatformRetryBackoffInSecs *ParsableLong `json:"platform_retry_backoff_in_secs,omitzero"`
	PlatformRetryExponent      *ParsableLong `json:"platform_retry_exponent,omitzero"`
	PlatformRetryLimitInSecs   *ParsableLong `json:"platform_retry_limit_in_secs,omitzero"`
	TimeoutRetryBackoffInSecs  *ParsableLong `json:"timeout_retry_backoff_in_secs,omitzero"`
	TimeoutRetryExponent       *ParsableLong `json:"timeout_retry_exponent,omitzero"`
	TimeoutRetryLimitInSecs    *ParsableLong `json:"timeout_retry_limit_in_secs,omitzero"`
}

// TimeTrigger starts the workflow on a schedule: a cron expression (CRON), a predefined schedule
// such as "@daily" (PREDEFINED) or an interval (INTERVAL). When type is omitted and cron is
// given, the trigger is a cron trigger. FuzzyMaxDelay spreads starts by up to that much.
type TimeTrigger struct {
	Type          TimeTriggerType `json:"type,omitzero"`
	Cron          string          `json:"cron,omitzero"`
	Expression    string          `json:"expression,omitzero"`
	Interval      string          `json:"interval,omitzero"`
	Start         string          `json:"start,omitzero"`
	Timezone      string          `json:"timezone,omitzero"`
	FuzzyMaxDelay *Duration       `json:"fuzzy_max_delay,omitzero"`
}

// EffectiveType returns the type, inferring CRON when unset and a cron expression is given.
func (t *TimeTrigger) EffectiveType() TimeTriggerType {
	if t.Type == "" && t.Cron != "" {
		return TimeTriggerCron
	}
	return t.Type
}

// SignalTrigger starts the workflow when signals matching all its definitions arrive (joined on
// join_keys) and the optional condition holds. DedupExpr computes a key so that one set of
// signals starts at most one instance.
type SignalTrigger struct {
	Definitions map[string]SignalTriggerEntry `json:"definitions"` // by signal name
	Params      Params                        `json:"params,omitzero"`
	Condition   string                        `json:"condition,omitzero"`
	DedupExpr   string                        `json:"dedup_expr,omitzero"`
	// Incremental makes the trigger keep a watermark per table: its one
	// signal is a table change, and each run gets the range of snapshots
	// since the last one a SUCCEEDED run covered (docs/incremental.md).
	Incremental bool `json:"incremental,omitzero"`
}

// UnmarshalJSON decodes strictly, keeping numbers exact (json.Number).
func (t *SignalTrigger) UnmarshalJSON(data []byte) error { return decodeStrict(data, t, "") }

// SignalTriggerEntry matches one signal name.
type SignalTriggerEntry struct {
	MatchParams map[string]SignalMatch `json:"match_params,omitzero"`
	JoinKeys    []string               `json:"join_keys,omitzero"`
}

// SignalMatch compares a signal parameter with a static value (a string or an integer).
type SignalMatch struct {
	Value    any            `json:"value"`
	Operator SignalOperator `json:"operator"`
}

// SignalDependency makes a step wait for a signal whose parameters match.
type SignalDependency struct {
	Name        string                      `json:"name"` // may interpolate params
	MatchParams map[string]SignalParamMatch `json:"match_params,omitzero"`
}

// SignalParamMatch compares a signal parameter with a parameter definition (LONG or STRING).
type SignalParamMatch struct {
	Param    Param          `json:"param"`
	Operator SignalOperator `json:"operator"`
}

// SignalOutput is a signal a step publishes when it succeeds.
type SignalOutput struct {
	Name    string `json:"name"`             // may interpolate params
	Params  Params `json:"params,omitzero"`  // indexed; LONG or STRING only
	Payload Params `json:"payload,omitzero"` // carried along, not indexed
}
