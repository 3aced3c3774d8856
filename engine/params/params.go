// Package params evaluates parameter definitions into typed values: literals
// are converted to their declared type and SEL expressions are evaluated in
// dependency order, each seeing the values evaluated before it.
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

// Evaluate evaluates defs. Expressions see base (already known values, such
// as the workflow's params when evaluating a step's) and the defs evaluated
// before them; defs are evaluated so that every def comes after the defs its
// expression reads. funcs are extra SEL functions (params.getFromStep, ...).
func Evaluate(ctx context.Context, defs workflow.Params, base map[string]any, funcs map[string]sel.Func) (Values, error) {
	order, programs, err := plan(defs)
	if err != nil {
		return nil, err
	}
	env := make(sel.MapEnv, len(base)+len(defs))
	maps.Copy(env, base)
	out := make(Values, len(defs))
	for _, name := range order {
		def := defs[name]
		var v any
		if prog := programs[name]; prog != nil {
			v, err = prog.Eval(ctx, env)
			if err != nil {
				return nil, &Error{Param: name, Err: err}
			}
		} else {
			v, err = literal(ctx, def, env, funcs)
			if err != nil {
				return nil, &Error{Param: name, Err: err}
			}
		}
		typed, err := Convert(def.Type, v)
		if err != nil {
			return nil, &Error{Param: name, Err: err}
		}
		out[name] = Value{Type: def.Type, Value: typed}
		env[name] = typed
	}
	return out, nil
}

// plan compiles the expressions and orders the defs by dependency.
func plan(defs workflow.Params) ([]string, map[string]*sel.Program, error) {
	names := slices.Sorted(maps.Keys(defs))
	programs := make(map[string]*sel.Program, len(defs))
	deps := make(map[string][]string, len(defs))
	for _, name := range names {
		def := defs[name]
		if def.Expression == nil {
			continue
		}
		prog, err := sel.Compile(*def.Expression)
		if err != nil {
			return nil, nil, &Error{Param: name, Err: err}
		}
		programs[name] = prog
		for _, n := range prog.Names() {
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
			return nil, nil, err
		}
	}
	return order, programs, nil
}

// literal returns a literal def's value; MAP values are evaluated member by
// member since each member is itself a param definition.
func literal(ctx context.Context, def workflow.Param, env sel.MapEnv, funcs map[string]sel.Func) (any, error) {
	if nested, ok := def.MapValue(); ok {
		vals, err := Evaluate(ctx, nested, env, funcs)
		if err != nil {
			return nil, err
		}
		out := make(map[string]any, len(vals))
		for k, v := range vals {
			out[k] = v.Value
		}
		return out, nil
	}
	return def.Value, nil
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
		out := make([]T, len(x))
		for i, e := range x {
			c, err := conv(e)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	case []string:
		out := make([]T, len(x))
		for i, e := range x {
			c, err := conv(e)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("want an array, got %T", v)
}
