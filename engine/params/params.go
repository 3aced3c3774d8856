// Package params merges and evaluates parameter definitions into typed
// values, as Maestro does: workflow and step params are merged in Maestro's
// order (WorkflowDefs, StepDefs), overrides are checked against the param
// modes (CheckOverrides), literal strings are interpolated ($name, ${name},
// ${name@step}, $$), SEL expressions are evaluated in dependency order, each
// seeing the values evaluated before it and upstream steps' params
// (step__name, params.getFromStep), and a step's output params are merged
// into its params (Outputs, MergeOutputs). See docs/params.md.
package params

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// Value is an evaluated parameter: its type and its Go value (int64,
// float64, bool, string, []string, []int64, []float64, []bool,
// map[string]string for STRING_MAP, map[string]any for MAP).
type Value struct {
	Type  workflow.ParamType `json:"type"`
	Value any                `json:"value"`
}

// Values are evaluated parameters by name.
type Values map[string]Value

// Plain returns the bare values, the form SEL sees.
func (vs Values) Plain() map[string]any {
	out := make(map[string]any, len(vs))
	for k, v := range vs {
		out[k] = v.Value
	}
	return out
}

// UnmarshalJSON restores each value's Go type from its declared type, so
// values survive a round trip through the database unchanged.
func (vs *Values) UnmarshalJSON(data []byte) error {
	var raw map[string]struct {
		Type  workflow.ParamType `json:"type"`
		Value json.RawMessage    `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	out := make(Values, len(raw))
	for name, r := range raw {
		var v any
		d := json.NewDecoder(bytes.NewReader(r.Value))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("param %s: %w", name, err)
		}
		typed, err := Convert(r.Type, v)
		if err != nil {
			return fmt.Errorf("param %s: %w", name, err)
		}
		out[name] = Value{Type: r.Type, Value: typed}
	}
	*vs = out
	return nil
}

// Error is a parameter that could not be evaluated.
type Error struct {
	Param string
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("param %s: %v", e.Param, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// ErrCycle reports parameters whose expressions depend on each other.
var ErrCycle = errors.New("parameters depend on each other in a cycle")

// StepLookup returns the value of param name of an upstream step (its
// evaluated params with its output params merged in); ok is false when the
// step has not run or has no such param.
type StepLookup func(step, name string) (v any, ok bool)

// Scope is what evaluated defs may read besides each other.
type Scope struct {
	// Base holds values already known, such as the workflow's params when
	// evaluating a step's; defs of the same name shadow them.
	Base map[string]any
	// Values are more values already known, read in place through their
	// Value (a run's evaluated workflow params, without a plain copy of
	// them); Base shadows them.
	Values Values
	// Steps resolves step__name, ${name@step} and params.getFromStep; nil
	// when no upstream step is visible.
	Steps StepLookup
	// Funcs are extra SEL functions.
	Funcs map[string]sel.Func

	// member: the defs are the members of a MAP param's value, whose
	// validators are not applied (Maestro keeps only a MAP's evaluated
	// values, not definitions of its members).
	member bool
	// used is the encoded size of params evaluated before, which count
	// towards MaxBytes with these (Batch).
	used int
	// set, when given, stands for Funcs: functions whose funcSet is built
	// once (workflowSet, signalledSet).
	set *funcSet
}

// Evaluate evaluates defs. Expressions see base (already known values, such
// as the workflow's params when evaluating a step's) and the defs evaluated
// before them; defs are evaluated so that every def comes after the defs its
// expression reads. funcs are extra SEL functions (params.getFromStep, ...).
func Evaluate(ctx context.Context, defs workflow.Params, base map[string]any, funcs map[string]sel.Func) (Values, error) {
	return EvaluateIn(ctx, defs, Scope{Base: base, Funcs: funcs})
}

// EvaluateIn evaluates defs in a scope. Literal strings are interpolated
// ($name, ${name}, ${name@step}, ${step__name}; $$ is a literal $),
// expressions are SEL, and a def with a validator must satisfy it. The
// values together must stay within MaxBytes (ErrTooLarge).
func EvaluateIn(ctx context.Context, defs workflow.Params, sc Scope) (Values, error) {
	funcs := sc.Funcs
	if sc.set != nil {
		funcs = sc.set.funcs
	}
	var fs funcSet
	switch {
	case sc.Steps != nil || isStep(defs):
		funcs = maps.Clone(funcs)
		if funcs == nil {
			funcs = map[string]sel.Func{}
		}
		funcs["params.getFromStep"] = getFromStep(sc.Steps, defs)
		fs = newFuncSet(funcs)
	case sc.set != nil:
		fs = *sc.set
	default:
		fs = newFuncSet(funcs)
	}
	ctx = withFuncs(ctx, fs)
	order, programs, err := plan(defs, fs)
	if err != nil {
		return nil, err
	}
	env := &scopeEnv{vals: make(sel.MapEnv, len(defs)), base: sc.Base, baseVals: sc.Values, steps: sc.Steps}
	out := make(Values, len(defs))
	size := budget{used: sc.used, limit: MaxBytes}
	// Maestro's default programs are remembered by their inputs
	// (defaultmemo.go) where nothing but the defs is visible to them.
	memo := sc.Base == nil && sc.Values == nil && sc.Steps == nil
	for _, name := range order {
		def := defs[name]
		var v any
		if prog := programs[name]; prog != nil {
			key, remembered := "", false
			if memo && prog == defaultPrograms()[name] {
				if k, ok := defaultMemoKey(ctx, name, env.vals); ok {
					key = k
					v, remembered = rememberedDefault(key)
				}
			}
			if !remembered {
				if v, err = prog.Eval(ctx, env); err != nil {
					return nil, &Error{Param: name, Err: err}
				}
				if key != "" {
					rememberDefault(key, v)
				}
			}
		} else {
			v, err = literal(ctx, def, env, sc.Steps, funcs)
			if err != nil {
				return nil, &Error{Param: name, Err: err}
			}
		}
		typed, err := convertCounted(name, def.Type, v, &size)
		if err != nil {
			return nil, err
		}
		env.vals[name] = typed
		if def.Validator != "" && !sc.member {
			if err := validate(ctx, def.Validator, typed, env, fs); err != nil {
				return nil, &Error{Param: name, Err: err}
			}
		}
		out[name] = Value{Type: def.Type, Value: typed}
	}
	return out, nil
}

// ErrValidator reports a value its def's validator refused.
var ErrValidator = errors.New("param value failed its validator")

// validate runs a validator (validator.go) on the value v: a SEL
// expression that sees the params and `param`, the value under check, and
// must return true, or Bean Validation annotations.
func validate(ctx context.Context, src string, v any, env sel.Env, fs funcSet) error {
	c, err := compileValidator(src, fs)
	if err != nil {
		return fmt.Errorf("validator: %w", err)
	}
	return c.check(ctx, v, env)
}

// scopeEnv resolves free names: evaluated params first, then the scope's
// base (read in place: a step's evaluation does not copy the workflow's
// params), then step__name
// references to upstream steps.
type scopeEnv struct {
	vals     sel.MapEnv
	base     map[string]any
	baseVals Values // under base
	steps    StepLookup
}

func (e *scopeEnv) Lookup(name string) (any, bool) {
	if v, ok := e.value(name); ok {
		return v, true
	}
	if e.steps != nil {
		if step, param, ok := strings.Cut(name, "__"); ok && step != "" && param != "" {
			return e.steps(step, param)
		}
	}
	return nil, false
}

// lookupRef resolves an interpolation reference.
func (e *scopeEnv) lookupRef(r ref) (any, bool) {
	if r.step == "" {
		return e.value(r.name)
	}
	if e.steps == nil {
		return nil, false
	}
	return e.steps(r.step, r.name)
}

// value is the param name: evaluated in this scope, else from its base.
func (e *scopeEnv) value(name string) (any, bool) {
	if v, ok := e.vals[name]; ok {
		return v, true
	}
	if v, ok := e.base[name]; ok {
		return v, true
	}
	if v, ok := e.baseVals[name]; ok {
		return v.Value, true
	}
	return nil, false
}

// visible is every param the scope's expressions see by name, as one map
// (the evaluated ones shadowing the base's).
func (e *scopeEnv) visible() map[string]any {
	out := make(map[string]any, len(e.baseVals)+len(e.base)+len(e.vals))
	for k, v := range e.baseVals {
		out[k] = v.Value
	}
	maps.Copy(out, e.base)
	maps.Copy(out, e.vals)
	return out
}

// ErrNoSuchStepParam reports params.getFromStep of something not available.
var ErrNoSuchStepParam = errors.New("no such step param")

// isStep reports whether defs are a step's params (StepDefs sets these).
func isStep(defs workflow.Params) bool {
	_, ok := defs[StepInstanceUUID]
	return ok
}

// stepFields are what the one-argument params.getFromStep(field) reads of
// the step whose params are evaluated, as Maestro's: its id, uuid,
// attempt and type.
var stepFields = map[string]string{
	StepID: StepID, StepInstanceUUID: StepInstanceUUID, StepAttemptID: StepAttemptID, "step_type_info": StepType,
}

// getFromStep is params.getFromStep: (stepId, paramName) reads a param of
// an upstream step; (field) reads a field of the step evaluated, from its
// own defs.
func getFromStep(steps StepLookup, self workflow.Params) sel.Func {
	return func(_ context.Context, args []any) (any, error) {
		if len(args) == 1 {
			field, _ := args[0].(string)
			name, ok := stepFields[field]
			if !ok {
				return nil, fmt.Errorf("params.getFromStep: invalid field name %q; one of step_id, step_instance_uuid, step_attempt_id, step_type_info", args[0])
			}
			def, ok := self[name]
			if !ok || def.Expression != nil {
				return nil, fmt.Errorf("params.getFromStep(%q) is only available to step params", field)
			}
			if str, ok := def.Value.(string); ok {
				return strings.ReplaceAll(str, "$$", "$"), nil // StepDefs escapes system values
			}
			return def.Value, nil
		}
		if steps == nil {
			return nil, fmt.Errorf("%w: no upstream step is visible here", ErrNoSuchStepParam)
		}
		if len(args) != 2 {
			return nil, fmt.Errorf("params.getFromStep takes (stepId, paramName) or (fieldName), got %d arguments", len(args))
		}
		step, ok1 := args[0].(string)
		name, ok2 := args[1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("params.getFromStep takes two strings")
		}
		v, ok := steps(step, name)
		if !ok {
			return nil, fmt.Errorf("%w: param %s of step %s", ErrNoSuchStepParam, name, step)
		}
		return v, nil
	}
}

// plan compiles the expressions and orders the defs by dependency: an
// expression depends on the defs it names, a literal on the defs its
// strings interpolate.
func plan(defs workflow.Params, fs funcSet) ([]string, map[string]*sel.Program, error) {
	order, programs, _, err := planDeps(defs, fs)
	return order, programs, err
}

// planDeps is plan, with the defs each def depends on.
func planDeps(defs workflow.Params, fs funcSet) ([]string, map[string]*sel.Program, map[string][]string, error) {
	names := slices.Sorted(maps.Keys(defs))
	programs := make(map[string]*sel.Program, len(defs))
	deps := make(map[string][]string, len(defs))
	for _, name := range names {
		def := defs[name]
		if def.Expression == nil {
			refs, err := literalRefs(def)
			if err != nil {
				return nil, nil, nil, &Error{Param: name, Err: err}
			}
			for _, n := range refs {
				if _, ok := defs[n]; ok && n != name {
					deps[name] = append(deps[name], n)
				}
			}
			continue
		}
		prog := precompiled(name, def)
		if prog == nil {
			var err error
			if prog, err = compileExpression(*def.Expression, fs); err != nil {
				return nil, nil, nil, &Error{Param: name, Err: err}
			}
		}
		programs[name] = prog
		for _, n := range programNames(name, prog) {
			if _, ok := defs[n]; ok && n != name {
				deps[name] = append(deps[name], n)
			}
		}
	}
	// Depth-first topological order; names sorted so the order is stable.
	const (
		unvisited = iota
		visiting
		done
	)
	state := make(map[string]int, len(defs))
	order := make([]string, 0, len(defs))
	var visit func(string, []string) error
	visit = func(n string, path []string) error {
		switch state[n] {
		case done:
			return nil
		case visiting:
			return &Error{Param: n, Err: fmt.Errorf("%w: %s", ErrCycle, strings.Join(append(path, n), " -> "))}
		}
		state[n] = visiting
		for _, d := range deps[n] {
			if err := visit(d, append(path, n)); err != nil {
				return err
			}
		}
		state[n] = done
		order = append(order, n)
		return nil
	}
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return nil, nil, nil, err
		}
	}
	return order, programs, deps, nil
}

// literalRefs returns the same-scope names a literal def interpolates,
// nested MAP members included.
func literalRefs(def workflow.Param) ([]string, error) {
	if nested, ok := def.MapValue(); ok {
		var out []string
		for _, d := range nested {
			if d.Expression != nil {
				prog, err := sel.Compile(*d.Expression)
				if err != nil {
					return nil, err
				}
				out = append(out, prog.Names()...)
				continue
			}
			refs, err := literalRefs(d)
			if err != nil {
				return nil, err
			}
			out = append(out, refs...)
		}
		return out, nil
	}
	var out []string
	for _, s := range stringsIn(def.Value) {
		refs, err := parseRefs(s)
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			if r.step == "" {
				out = append(out, r.name)
			}
		}
	}
	return out, nil
}

// literal returns a literal def's value with its strings interpolated; MAP
// values are evaluated member by member since each member is itself a param
// definition. As in Maestro's ParamEvaluator, each member is evaluated
// against the params of the enclosing scope alone: a name in a member's
// expression is the enclosing scope's param of that name, never a sibling
// member (Maestro's sample-wf-map-params.json: p1.l10.e2 = e1.get('bar')
// reads the top-level e1).
func literal(ctx context.Context, def workflow.Param, env *scopeEnv, steps StepLookup, funcs map[string]sel.Func) (any, error) {
	if nested, ok := def.MapValue(); ok {
		out := make(map[string]any, len(nested))
		var base map[string]any // what members' expressions see, built for the first
		for _, name := range slices.Sorted(maps.Keys(nested)) {
			member := nested[name]
			if member.Expression == nil {
				// What EvaluateIn of the member alone computes (a member
				// has no validator run), read from this scope in place
				// rather than from a copy of it: an Http step's map of
				// literals copied the workflow's params once per member.
				typed, err := literalMember(ctx, name, member, env, steps, funcs)
				if err != nil {
					return nil, err
				}
				out[name] = typed
				continue
			}
			if base == nil {
				base = env.visible()
			}
			vals, err := EvaluateIn(ctx, workflow.Params{name: member},
				Scope{Base: base, Steps: steps, Funcs: funcs, member: true})
			if err != nil {
				return nil, err
			}
			out[name] = vals[name].Value
		}
		return out, nil
	}
	return interpolateValue(def.Value, env.lookupRef)
}

// literalMember evaluates a map param's member that has no expression as
// EvaluateIn of it alone would, in env (the map's scope: its evaluated
// params shadowing its base, as the copy EvaluateIn would be given).
func literalMember(ctx context.Context, name string, def workflow.Param, env *scopeEnv, steps StepLookup, funcs map[string]sel.Func) (any, error) {
	v, err := literal(ctx, def, env, steps, funcs)
	if err != nil {
		return nil, &Error{Param: name, Err: err}
	}
	return convertCounted(name, def.Type, v, &budget{limit: MaxBytes})
}

// convertCounted converts the value v of param name to t and counts it
// against size before anything else reads it (MaxBytes).
func convertCounted(name string, t workflow.ParamType, v any, size *budget) (any, error) {
	typed, err := Convert(t, v)
	if err != nil {
		return nil, &Error{Param: name, Err: err}
	}
	if err := size.add(name, Value{Type: t, Value: typed}); err != nil {
		return nil, &Error{Param: name, Err: err}
	}
	return typed, nil
}

// Convert converts v to the Go type of t, accepting JSON-decoded values
// (json.Number, []any, map[string]any) and SEL results.
func Convert(t workflow.ParamType, v any) (any, error) {
	switch t {
	case workflow.ParamTypeString:
		return toString(v)
	case workflow.ParamTypeLong:
		return toLong(v)
	case workflow.ParamTypeDouble:
		return toDouble(v)
	case workflow.ParamTypeBoolean:
		return toBool(v)
	case workflow.ParamTypeStringArray:
		return toSlice(v, toString)
	case workflow.ParamTypeLongArray:
		return toSlice(v, toLong)
	case workflow.ParamTypeDoubleArray:
		return toSlice(v, toDouble)
	case workflow.ParamTypeBooleanArray:
		return toSlice(v, toBool)
	case workflow.ParamTypeStringMap:
		m, ok := v.(map[string]any)
		if !ok {
			if sm, ok := v.(map[string]string); ok {
				return sm, nil
			}
			return nil, fmt.Errorf("want a STRING_MAP, got %T", v)
		}
		out := make(map[string]string, len(m))
		for k, e := range m {
			s, err := toString(e)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", k, err)
			}
			out[k] = s
		}
		return out, nil
	case workflow.ParamTypeMap:
		switch m := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(m))
			for k, e := range m {
				out[k] = normalize(e)
			}
			return out, nil
		case map[string]string:
			out := make(map[string]any, len(m))
			for k, e := range m {
				out[k] = e
			}
			return out, nil
		}
		return nil, fmt.Errorf("want a MAP, got %T", v)
	}
	return nil, fmt.Errorf("unknown param type %q", t)
}

// normalize turns JSON numbers inside MAP values into int64 or float64.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

func toString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "", fmt.Errorf("want a STRING, got null")
	}
	return "", fmt.Errorf("want a STRING, got %T", v)
}

func toLong(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case json.Number:
		return x.Int64()
	case float64:
		if x == float64(int64(x)) {
			return int64(x), nil
		}
	case string:
		return strconv.ParseInt(strings.TrimSpace(x), 10, 64)
	}
	return 0, fmt.Errorf("want a LONG, got %T %v", v, v)
}

func toDouble(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case json.Number:
		return x.Float64()
	case string:
		return strconv.ParseFloat(strings.TrimSpace(x), 64)
	}
	return 0, fmt.Errorf("want a DOUBLE, got %T %v", v, v)
}

func toBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		return strconv.ParseBool(strings.ToLower(strings.TrimSpace(x)))
	}
	return false, fmt.Errorf("want a BOOLEAN, got %T %v", v, v)
}

func toSlice[T any](v any, conv func(any) (T, error)) ([]T, error) {
	switch x := v.(type) {
	case []T:
		return x, nil
	case []any:
		return convertEach(x, conv)
	case []string:
		return convertEach(x, conv)
	}
	return nil, fmt.Errorf("want an array, got %T", v)
}

// convertEach converts every element, naming the first that fails.
func convertEach[E, T any](xs []E, conv func(any) (T, error)) ([]T, error) {
	out := make([]T, len(xs))
	for i, e := range xs {
		c, err := conv(e)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}
