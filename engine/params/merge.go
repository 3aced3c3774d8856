package params

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// Names of the params Maestro sets itself. The general ones are reserved:
// no definition, run or restart param may set them.
const (
	WorkflowID         = "workflow_id"
	WorkflowInstanceID = "workflow_instance_id"
	WorkflowRunID      = "workflow_run_id"
	StepID             = "step_id"
	StepInstanceUUID   = "step_instance_uuid"
	StepAttemptID      = "step_attempt_id"
	StepType           = "step_type"

	// RunTS is the run's time in epoch milliseconds (the trigger time for a
	// time-triggered run). It may be set at start, e.g. by a backfill.
	RunTS = "RUN_TS"
	// FirstTimeTriggerTimezone is the time zone of the workflow's first time
	// trigger, else UTC.
	FirstTimeTriggerTimezone = "FIRST_TIME_TRIGGER_TIMEZONE"
)

// reserved are the names users cannot set.
var reserved = map[string]bool{
	WorkflowID: true, WorkflowInstanceID: true, WorkflowRunID: true,
	StepID: true, StepInstanceUUID: true, StepAttemptID: true, Owner: true,
}

// Reserved reports whether name is a param Maestro sets and users cannot.
func Reserved(name string) bool { return reserved[name] }

// ReservedNames returns the reserved names, sorted.
func ReservedNames() []string { return slices.Sorted(maps.Keys(reserved)) }

// Phase is when params are overridden.
type Phase int

// Override phases.
const (
	// PhaseStart: run params given when a run starts.
	PhaseStart Phase = iota
	// PhaseRestart: restart params given when a run is restarted.
	PhaseRestart
	// PhaseOutput: output params a step's job returns at run time.
	PhaseOutput
)

func (p Phase) String() string {
	switch p {
	case PhaseStart:
		return "start"
	case PhaseRestart:
		return "restart"
	default:
		return "output"
	}
}

// Mutable reports whether a param of mode m may be overridden in phase p.
func Mutable(m workflow.ParamMode, p Phase) bool {
	if m == "" {
		m = workflow.DefaultParamMode
	}
	switch p {
	case PhaseStart:
		return m == workflow.ParamModeMutable || m == workflow.ParamModeMutableOnStart || m == workflow.ParamModeMutableOnStartRestart
	case PhaseRestart:
		return m == workflow.ParamModeMutable || m == workflow.ParamModeMutableOnStartRestart
	default:
		return m == workflow.ParamModeMutable
	}
}

// ErrNotOverridable reports an override the param's mode, its type or a
// reserved name forbids.
var ErrNotOverridable = errors.New("param cannot be overridden")

// CheckOverrides checks overrides (run, restart or output params) against
// the defs they override: a reserved name is refused; a def's mode must
// allow the phase (CONSTANT and IMMUTABLE never change, MUTABLE_ON_START
// only at start, MUTABLE_ON_START_RESTART at start and restart, MUTABLE
// always); an override keeps its def's type. A name without a def is a new
// param and always allowed. Every problem is reported; each wraps
// ErrNotOverridable.
func CheckOverrides(defs, overrides workflow.Params, phase Phase) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		o := overrides[name]
		if reserved[name] {
			errs = append(errs, fmt.Errorf("%w: %s is reserved and set by Maestro", ErrNotOverridable, name))
			continue
		}
		def, ok := defs[name]
		if !ok || sameDefinition(def, o) {
			continue // as in Maestro, repeating a definition unchanged changes nothing
		}
		if !Mutable(def.Mode, phase) {
			errs = append(errs, fmt.Errorf("%w: %s has mode %s and cannot be changed on %s", ErrNotOverridable, name, def.EffectiveMode(), phase))
			continue
		}
		if o.Type != "" && def.Type != "" && o.Type != def.Type {
			errs = append(errs, fmt.Errorf("%w: %s is %s, the override is %s", ErrNotOverridable, name, def.Type, o.Type))
		}
	}
	return errors.Join(errs...)
}

// sameDefinition reports whether an override repeats a definition: the
// same value or expression (JSON-equal) and, when it names one, the same
// type.
func sameDefinition(def, o workflow.Param) bool {
	if o.Type != "" && def.Type != "" && o.Type != def.Type {
		return false
	}
	if (def.Expression == nil) != (o.Expression == nil) || (def.Expression != nil && *def.Expression != *o.Expression) {
		return false
	}
	a, errA := json.Marshal(def.Value)
	b, errB := json.Marshal(o.Value)
	return errA == nil && errB == nil && string(a) == string(b)
}

// override merges overrides into defs as Maestro merges run params
// (workflow.MergeParam): a literal MAP or STRING_MAP merges member by
// member, and an override keeps the def's mode and validator unless it
// sets them (CheckOverrides has checked that the def's mode allows it).
func override(defs, overrides workflow.Params) {
	for name, o := range overrides {
		if def, ok := defs[name]; ok {
			o = workflow.MergeParam(def, o)
		}
		defs[name] = o
	}
}

// WorkflowInput is what evaluating a run's workflow params needs.
type WorkflowInput struct {
	Workflow *workflow.Workflow
	// RunParams are the run (or restart) params.
	RunParams workflow.Params
	Phase     Phase
	// InstanceID and RunID identify the run, when known.
	InstanceID, RunID int64
	// Now is the run's time (RUN_TS), time.Now when zero.
	Now time.Time
	// Initiator is the run's initiator as Maestro's JSON has it ({"type":
	// "TIME", "timezone": ...}); nil is a manual run.
	Initiator map[string]any
	// RunPolicy is how the run was started: START (or "") for a fresh
	// start, else the restart policy (params.getFromInstance("RUN_POLICY")).
	RunPolicy string
	// Owner is the workflow's owner (the owner param).
	Owner string
	// DryRun: the evaluation is the dry run at push (INITIATOR_TYPE is
	// VALIDATION).
	DryRun bool
	// Signals answers params.getFromSignal; nil when no param calls it.
	Signals *SignalSource
}

// WorkflowDefs returns the merged defs of a run's workflow params, in
// Maestro's order: the defaults (RUN_TS, FIRST_TIME_TRIGGER_TIMEZONE and
// Maestro's default workflow params, defaults.go), the info params
// (workflow_id, and the instance and run ids when known), the definition's
// params, then the run params, checked against the modes.
func WorkflowDefs(in WorkflowInput) (workflow.Params, error) {
	wf := in.Workflow
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	tz := "UTC"
	for _, t := range wf.TimeTriggers {
		if t.Timezone != "" {
			if _, err := time.LoadLocation(t.Timezone); err == nil {
				tz = t.Timezone
			}
			break
		}
	}
	// The defaults, five info params, the definition's and the run's.
	defs := make(workflow.Params, len(defaultExpressions)+5+len(wf.Params)+len(in.RunParams))
	maps.Copy(defs, defaultParams())
	defs[RunTS] = workflow.Param{Type: workflow.ParamTypeLong, Value: now.UnixMilli(), Mode: workflow.ParamModeMutableOnStart}
	defs[FirstTimeTriggerTimezone] = workflow.Param{Type: workflow.ParamTypeString, Value: tz, Mode: workflow.ParamModeMutableOnStart}
	defs[WorkflowID] = workflow.Param{Type: workflow.ParamTypeString, Value: wf.ID, Mode: workflow.ParamModeConstant}
	if in.InstanceID > 0 {
		defs[WorkflowInstanceID] = workflow.Param{Type: workflow.ParamTypeLong, Value: in.InstanceID, Mode: workflow.ParamModeConstant}
	}
	if in.RunID > 0 {
		defs[WorkflowRunID] = workflow.Param{Type: workflow.ParamTypeLong, Value: in.RunID, Mode: workflow.ParamModeConstant}
	}
	for name, p := range wf.Params {
		if !reserved[name] {
			defs[name] = p
		}
	}
	if err := CheckOverrides(defs, in.RunParams, in.Phase); err != nil {
		return nil, err
	}
	override(defs, in.RunParams)
	return defs, nil
}

// EvaluateWorkflow evaluates a run's workflow params (see WorkflowDefs).
func EvaluateWorkflow(ctx context.Context, in WorkflowInput) (Values, error) {
	defs, err := WorkflowDefs(in)
	if err != nil {
		return nil, err
	}
	set := workflowSet()
	ctx = context.WithValue(ctx, instanceKey{}, &in)
	if in.Signals != nil {
		set = signalledSet()
		ctx = WithSignals(ctx, in.Signals)
	}
	return EvaluateIn(ctx, defs, Scope{set: set})
}

// StepInput is what evaluating a step attempt's params needs.
type StepInput struct {
	WorkflowID string
	InstanceID int64
	RunID      int64
	StepID     string
	StepType   string
	AttemptID  int64
	UUID       string
	// Injected are the params the step's runtime injects from its schema.
	Injected workflow.Params
	// Template are the params the step inherits from the job template its
	// sub_type names (jobtemplate.Store.Params), merged after Injected:
	// Maestro's runtimes inject them. A step's own param merges onto the
	// template's of the same name (workflow.MergeParam): a literal MAP or
	// STRING_MAP member by member, any other replacing its value but
	// keeping the mode and validator it leaves unset.
	Template workflow.Params
	// Typed are the default params of the step's type (a foreach's
	// loop_params and loop_index, ...).
	Typed workflow.Params
	// Defs are the step definition's params.
	Defs workflow.Params
	// RunParams are the run or restart params given for this step: they
	// override defs (modes permitting) and add params the definition lacks.
	RunParams workflow.Params
	Phase     Phase
	// Workflow holds the run's evaluated workflow params, which the step's
	// expressions and interpolations read.
	Workflow map[string]any
	// WorkflowValues are the same as evaluated values, read in place
	// (Scope.Values), when Workflow is not given.
	WorkflowValues Values
	// Steps reads upstream steps' params.
	Steps StepLookup
}

// StepDefs merges a step's defs in Maestro's order, later layers replacing
// earlier ones of the same name:
//
//  1. default general params (workflow_instance_id, step_instance_uuid,
//     step_attempt_id, step_id; reserved),
//  2. params injected by the step runtime, then those of the step's job
//     template (Template),
//  3. default params of the step's type,
//  4. workflow and step info params (workflow_id, workflow_run_id,
//     step_type),
//  5. new params from run or restart params that the definition lacks,
//  6. the step definition's params,
//  7. run and restart params overriding defined ones, last.
func StepDefs(in StepInput) (workflow.Params, error) {
	if err := CheckOverrides(in.Defs, in.RunParams, in.Phase); err != nil {
		return nil, err
	}
	defs := workflow.Params{
		WorkflowInstanceID: {Type: workflow.ParamTypeLong, Value: in.InstanceID, Mode: workflow.ParamModeConstant},
		StepInstanceUUID:   {Type: workflow.ParamTypeString, Value: escape(in.UUID), Mode: workflow.ParamModeConstant},
		StepAttemptID:      {Type: workflow.ParamTypeLong, Value: in.AttemptID, Mode: workflow.ParamModeConstant},
		StepID:             {Type: workflow.ParamTypeString, Value: escape(in.StepID), Mode: workflow.ParamModeConstant},
	}
	maps.Copy(defs, in.Injected)
	maps.Copy(defs, in.Template)
	maps.Copy(defs, in.Typed)
	defs[WorkflowID] = workflow.Param{Type: workflow.ParamTypeString, Value: escape(in.WorkflowID), Mode: workflow.ParamModeConstant}
	defs[WorkflowRunID] = workflow.Param{Type: workflow.ParamTypeLong, Value: in.RunID, Mode: workflow.ParamModeConstant}
	defs[StepType] = workflow.Param{Type: workflow.ParamTypeString, Value: escape(in.StepType), Mode: workflow.ParamModeConstant}
	for name, p := range in.RunParams {
		if _, defined := in.Defs[name]; !defined {
			defs[name] = p
		}
	}
	for name, p := range in.Defs {
		if reserved[name] {
			continue
		}
		if d, ok := in.Typed[name]; ok && p.Mode == "" {
			p.Mode = d.Mode // a default's mode holds unless the step sets one
		}
		if t, ok := defs[name]; ok {
			if _, inherited := in.Template[name]; inherited {
				p = workflow.MergeParam(t, p)
			}
		}
		defs[name] = p
	}
	defined := workflow.Params{}
	for name, p := range in.RunParams {
		if _, ok := in.Defs[name]; ok {
			defined[name] = p
		}
	}
	override(defs, defined)
	return defs, nil
}

// escape protects a system value from interpolation.
func escape(s string) string { return strings.ReplaceAll(s, "$", "$$") }

// EvaluateStep merges (see StepDefs) and evaluates a step attempt's params.
func EvaluateStep(ctx context.Context, in StepInput) (Values, error) {
	defs, err := StepDefs(in)
	if err != nil {
		return nil, err
	}
	return EvaluateIn(ctx, defs, Scope{Base: in.Workflow, Values: in.WorkflowValues, Steps: in.Steps})
}

// Outputs converts output params to values: an entry may be a Value (or
// its JSON form {"type": ..., "value": ...}) or a bare value whose type is
// inferred. A name the step defines keeps the defined type.
func Outputs(defined Values, raw map[string]any) (Values, error) {
	out := make(Values, len(raw))
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		v, err := outputValue(raw[name])
		if err == nil {
			if d, ok := defined[name]; ok && d.Type != v.Type {
				var conv any
				conv, err = Convert(d.Type, v.Value)
				v = Value{Type: d.Type, Value: conv}
			}
		}
		if err != nil {
			errs = append(errs, &Error{Param: name, Err: err})
			continue
		}
		out[name] = v
	}
	return out, errors.Join(errs...)
}

func outputValue(x any) (Value, error) {
	switch v := x.(type) {
	case Value:
		conv, err := Convert(v.Type, v.Value)
		return Value{Type: v.Type, Value: conv}, err
	case map[string]any:
		if t, ok := v["type"].(string); ok && len(v) == 2 {
			if raw, ok := v["value"]; ok && workflow.ParamType(t).Valid() {
				conv, err := Convert(workflow.ParamType(t), raw)
				return Value{Type: workflow.ParamType(t), Value: conv}, err
			}
		}
	}
	t, err := Infer(x)
	if err != nil {
		return Value{}, err
	}
	conv, err := Convert(t, x)
	return Value{Type: t, Value: conv}, err
}

// Infer returns the param type of a bare value.
func Infer(v any) (workflow.ParamType, error) {
	switch x := v.(type) {
	case string:
		return workflow.ParamTypeString, nil
	case bool:
		return workflow.ParamTypeBoolean, nil
	case int, int32, int64:
		return workflow.ParamTypeLong, nil
	case float32, float64:
		return workflow.ParamTypeDouble, nil
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return workflow.ParamTypeLong, nil
		}
		return workflow.ParamTypeDouble, nil
	case []string:
		return workflow.ParamTypeStringArray, nil
	case []int64, []int:
		return workflow.ParamTypeLongArray, nil
	case []float64:
		return workflow.ParamTypeDoubleArray, nil
	case []bool:
		return workflow.ParamTypeBooleanArray, nil
	case map[string]string:
		return workflow.ParamTypeStringMap, nil
	case map[string]any:
		return workflow.ParamTypeMap, nil
	case []any:
		if len(x) == 0 {
			return workflow.ParamTypeStringArray, nil
		}
		first, err := Infer(x[0])
		if err != nil {
			return "", err
		}
		for _, e := range x[1:] {
			t, err := Infer(e)
			if err != nil {
				return "", err
			}
			if t == workflow.ParamTypeDouble && first == workflow.ParamTypeLong {
				first = t
			} else if t != first && !(t == workflow.ParamTypeLong && first == workflow.ParamTypeDouble) {
				return "", fmt.Errorf("array mixes %s and %s", first, t)
			}
		}
		switch first {
		case workflow.ParamTypeString:
			return workflow.ParamTypeStringArray, nil
		case workflow.ParamTypeLong:
			return workflow.ParamTypeLongArray, nil
		case workflow.ParamTypeDouble:
			return workflow.ParamTypeDoubleArray, nil
		case workflow.ParamTypeBoolean:
			return workflow.ParamTypeBooleanArray, nil
		}
		return "", fmt.Errorf("cannot infer the type of an array of %s", first)
	case nil:
		return "", errors.New("null is not a param value")
	}
	return "", fmt.Errorf("cannot infer the param type of %T", v)
}

// MergeOutputs merges a step's output params into its evaluated params.
// defs are the step's merged defs (for the modes): an output may only
// change a MUTABLE param, never a reserved one; new names are added. The
// result must stay within MaxBytes (ErrTooLarge).
func MergeOutputs(vals Values, defs workflow.Params, outputs Values) (Values, error) {
	asDefs := make(workflow.Params, len(outputs))
	for name, v := range outputs {
		asDefs[name] = workflow.Param{Type: v.Type}
	}
	if err := CheckOverrides(defs, asDefs, PhaseOutput); err != nil {
		return nil, err
	}
	out := maps.Clone(vals)
	if out == nil {
		out = Values{}
	}
	maps.Copy(out, outputs)
	if err := CheckSize(out); err != nil {
		return nil, fmt.Errorf("params with the output params merged in: %w", err)
	}
	return out, nil
}

// Check reports what can be found wrong with user-defined params before a
// run: a malformed interpolation and params that depend on each other in a
// cycle. Expressions that do not compile are left to the expression check.
// It fits workflow.Validator.CheckParams.
func Check(ps workflow.Params) error {
	compiles := make(workflow.Params, len(ps))
	for name, p := range ps {
		if p.Expression != nil {
			if _, err := sel.Compile(*p.Expression); err != nil {
				continue
			}
		}
		compiles[name] = p
	}
	_, _, err := plan(compiles, funcSet{})
	return err
}

// ReadsUpstream reports whether defs may read upstream steps' params
// (step__name, ${name@step}, params.getFromStep, params.getFromSubworkflow,
// params.getFromForeach),
// so that the engine only
// gathers those for steps that need them.
func ReadsUpstream(defs workflow.Params) bool {
	for _, d := range defs {
		if d.Expression != nil {
			if strings.Contains(*d.Expression, "__") || strings.Contains(*d.Expression, "getFromStep") ||
				strings.Contains(*d.Expression, "getFromSubworkflow") || strings.Contains(*d.Expression, "getFromForeach") {
				return true
			}
			continue
		}
		if nested, ok := d.MapValue(); ok {
			if ReadsUpstream(nested) {
				return true
			}
			continue
		}
		for _, s := range stringsIn(d.Value) {
			if strings.Contains(s, "$") && (strings.Contains(s, "@") || strings.Contains(s, "__")) {
				return true
			}
		}
	}
	return false
}
