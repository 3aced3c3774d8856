package params

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// Reading signals from params, as Maestro's param extension does:
//
//   - params.getFromSignal(param): a param the signal trigger that started
//     the run evaluated (the SIGNAL initiator's params);
//   - params.getFromSignal(signalName, param): a param of the signal
//     instance of that name among those that started the run;
//   - params.getFromSignalOrDefault(signalName, param, default): the same,
//     or default when there is none;
//   - params.getFromSignalDependency(index, param): a param of the signal
//     instance that met the step's signal dependency at index (a step's
//     params only).
//
// Signal params are STRING or LONG; a trigger param has its own type.

// ErrNoSignal reports a getFromSignal or getFromSignalDependency that
// finds nothing to read.
var ErrNoSignal = errors.New("no such signal param")

// SignalRef names a signal instance.
type SignalRef struct {
	Name string
	Seq  int64
}

// SignalSource is what the signal functions read.
type SignalSource struct {
	// Trigger is false when the run was not started by a signal trigger:
	// then getFromSignal fails, as in Maestro.
	Trigger bool
	// TriggerParams are the values of the trigger's params.
	TriggerParams map[string]any
	// SignalIDs maps each signal name of the set that started the run to
	// its instance's seq id.
	SignalIDs map[string]int64
	// Read returns the params of a signal instance.
	Read func(ctx context.Context, ref SignalRef) (map[string]any, error)
	// Dependencies returns, for a step, the signal instance that met each
	// of its signal dependencies in order (Seq 0 where a bypass let it go
	// on); nil outside a step.
	Dependencies func(ctx context.Context) ([]SignalRef, error)
}

// RunSignals is the SignalSource of a run started with initiator (its
// stored JSON; a run that no signal trigger started reads nothing), whose
// signal instances read returns.
func RunSignals(initiator []byte, read func(ctx context.Context, ref SignalRef) (map[string]any, error)) (*SignalSource, error) {
	var in struct {
		Type      string           `json:"type"`
		SignalIDs map[string]int64 `json:"signal_id_map"`
		Params    map[string]struct {
			Evaluated any `json:"evaluated_result"`
		} `json:"params"`
	}
	src := &SignalSource{Read: read}
	if len(initiator) == 0 {
		return src, nil
	}
	dec := json.NewDecoder(bytes.NewReader(initiator))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("decode the run's initiator: %w", err)
	}
	if !strings.EqualFold(in.Type, "SIGNAL") {
		return src, nil
	}
	src.Trigger, src.SignalIDs = true, in.SignalIDs
	src.TriggerParams = make(map[string]any, len(in.Params))
	for k, p := range in.Params {
		src.TriggerParams[k] = normalize(p.Evaluated)
	}
	return src, nil
}

// signalsKey carries the SignalSource of an evaluation (WithSignals).
type signalsKey struct{}

// WithSignals returns ctx carrying src, which SignalFuncs read.
func WithSignals(ctx context.Context, src *SignalSource) context.Context {
	return context.WithValue(ctx, signalsKey{}, src)
}

// SignalFuncs are the signal functions. They read the SignalSource the
// evaluation's context carries (WithSignals), so a program compiled with
// them once serves every evaluation.
var SignalFuncs = map[string]sel.Func{
	"params.getFromSignal":           withSource((*SignalSource).getFromSignal),
	"params.getFromSignalOrDefault":  withSource((*SignalSource).getFromSignalOrDefault),
	"params.getFromSignalDependency": withSource((*SignalSource).getFromSignalDependency),
}

func withSource(fn func(*SignalSource, context.Context, []any) (any, error)) sel.Func {
	return func(ctx context.Context, args []any) (any, error) {
		src, _ := ctx.Value(signalsKey{}).(*SignalSource)
		if src == nil {
			return nil, fmt.Errorf("%w: no signals are available here", ErrNoSignal)
		}
		return fn(src, ctx, args)
	}
}

// ReadsSignals reports whether defs may call the signal functions, so that
// the engine only builds a SignalSource for params that need one.
func ReadsSignals(defs workflow.Params) bool {
	for _, d := range defs {
		if d.Expression != nil && strings.Contains(*d.Expression, "getFromSignal") {
			return true
		}
		if nested, ok := d.MapValue(); ok && ReadsSignals(nested) {
			return true
		}
	}
	return false
}

func stringArgs(fn string, args []any, n ...int) ([]string, error) {
	ok := false
	for _, k := range n {
		ok = ok || len(args) == k
	}
	if !ok {
		return nil, fmt.Errorf("params.%s: wrong number of arguments (%d)", fn, len(args))
	}
	out := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = v
		case int64:
			out[i] = strconv.FormatInt(v, 10)
		default:
			if fn == "getFromSignalOrDefault" && i == 2 {
				continue
			}
			return nil, fmt.Errorf("params.%s: argument %d must be a string, got %T", fn, i+1, a)
		}
	}
	return out, nil
}

func (src *SignalSource) getFromSignal(ctx context.Context, args []any) (any, error) {
	a, err := stringArgs("getFromSignal", args, 1, 2)
	if err != nil {
		return nil, err
	}
	if !src.Trigger {
		return nil, fmt.Errorf("%w: the run was not started by a signal trigger; params.getFromSignal has nothing to read", ErrNoSignal)
	}
	if len(a) == 1 {
		v, ok := src.TriggerParams[a[0]]
		if !ok {
			return nil, fmt.Errorf("%w: the signal trigger has no param %q", ErrNoSignal, a[0])
		}
		return v, nil
	}
	seq, ok := src.SignalIDs[a[0]]
	if !ok {
		return nil, fmt.Errorf("%w: no signal %q started the run", ErrNoSignal, a[0])
	}
	return src.param(ctx, SignalRef{Name: a[0], Seq: seq}, a[1])
}

func (src *SignalSource) getFromSignalOrDefault(ctx context.Context, args []any) (any, error) {
	a, err := stringArgs("getFromSignalOrDefault", args, 3)
	if err != nil {
		return nil, err
	}
	v, err := src.getFromSignal(ctx, []any{a[0], a[1]})
	if errors.Is(err, ErrNoSignal) {
		return args[2], nil
	}
	return v, err
}

func (src *SignalSource) getFromSignalDependency(ctx context.Context, args []any) (any, error) {
	a, err := stringArgs("getFromSignalDependency", args, 2)
	if err != nil {
		return nil, err
	}
	if src.Dependencies == nil {
		return nil, fmt.Errorf("%w: params.getFromSignalDependency is available to a step's params only", ErrNoSignal)
	}
	i, err := strconv.Atoi(a[0])
	if err != nil || i < 0 {
		return nil, fmt.Errorf("params.getFromSignalDependency: index %q is not a dependency index", a[0])
	}
	deps, err := src.Dependencies(ctx)
	if err != nil {
		return nil, err
	}
	if i >= len(deps) {
		return nil, fmt.Errorf("%w: signal dependency index %d is out of bounds (%d dependencies)", ErrNoSignal, i, len(deps))
	}
	if deps[i].Seq == 0 {
		return nil, fmt.Errorf("%w: signal dependency %d was bypassed, no signal met it", ErrNoSignal, i)
	}
	return src.param(ctx, deps[i], a[1])
}

func (src *SignalSource) param(ctx context.Context, ref SignalRef, name string) (any, error) {
	ps, err := src.Read(ctx, ref)
	if err != nil {
		return nil, err
	}
	v, ok := ps[name]
	if !ok {
		return nil, fmt.Errorf("%w: signal %s instance %d has no param %q", ErrNoSignal, ref.Name, ref.Seq, name)
	}
	return normalize(v), nil
}
