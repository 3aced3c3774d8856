package signalbroker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/trigger"
	"github.com/maestro-aws/maestro/engine/trigger/schedule"
	"github.com/maestro-aws/maestro/engine/trigger/signal"
	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// compiled is a signal trigger ready to match: its definitions' match
// params and join keys, its params, and its condition and dedup_expr
// compiled. A trigger's uuid derives from its definition, so a compiled
// trigger is cached by uuid for good.
type compiled struct {
	uuid    string
	names   []string
	entries map[string]entry
	params  workflow.Params
	// condition and dedup are nil when the trigger has none.
	condition, dedup *sel.Program
	conditionText    string
	dedupText        string
	// incremental: the trigger keeps a watermark per table
	// (startIncremental) instead of starting a run per set.
	incremental bool
	// err is why the stored definition cannot be used; every set it
	// matches is then recorded as an error.
	err error
}

type entry struct {
	matches  []signal.Match
	joinKeys []string
}

// evaluationTimeout bounds the evaluation of one set's params, condition
// and dedup_expr (SEL's own limits stop a runaway expression sooner).
const evaluationTimeout = 5 * time.Second

// compile prepares a stored trigger.
func compile(uuid string, def json.RawMessage) *compiled {
	c := &compiled{uuid: uuid, entries: map[string]entry{}}
	t, err := trigger.DecodeSignalTrigger(def)
	if err != nil {
		c.err = err
		return c
	}
	for name, e := range t.Definitions {
		ms, err := signal.StaticMatches(e.MatchParams)
		if err != nil {
			c.err = fmt.Errorf("signal %s: %w", name, err)
			return c
		}
		c.names = append(c.names, name)
		c.entries[name] = entry{matches: ms, joinKeys: e.JoinKeys}
	}
	slices.Sort(c.names)
	c.params = t.Params
	c.incremental = t.Incremental
	opts := sel.WithFunctions(params.SignalFuncs)
	if t.Condition != "" {
		if c.condition, err = sel.Compile(t.Condition, opts); err != nil {
			c.err = fmt.Errorf("condition: %w", err)
			return c
		}
		c.conditionText = t.Condition
	}
	if t.DedupExpr != "" {
		if c.dedup, err = sel.Compile(t.DedupExpr, opts); err != nil {
			c.err = fmt.Errorf("dedup_expr: %w", err)
			return c
		}
		c.dedupText = t.DedupExpr
	}
	return c
}

// joinKey returns the encoded values of the entry's join keys in a
// signal's params; ok is false when one is missing (the signal cannot be
// joined, so it does not match).
func (e entry) joinKey(ps map[string]any) (string, bool) {
	if len(e.joinKeys) == 0 {
		return "[]", true
	}
	vals := make([]any, len(e.joinKeys))
	for i, k := range e.joinKeys {
		v, ok := ps[k]
		if !ok {
			return "", false
		}
		vals[i] = v
	}
	b, err := json.Marshal(vals)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// evaluation is what a satisfying set evaluates to.
type evaluation struct {
	// run is false when the condition is false (or could not be
	// evaluated: err says why); the set is consumed all the same.
	run       bool
	requestID string
	initiator map[string]any
	err       error
}

// evaluate evaluates the trigger's params, condition and dedup_expr for a
// set of signal instances (name to instance). They may read the set's
// params with params.getFromSignal(name, param); the condition and the
// dedup_expr see the trigger's params by name and through
// params.getFromSignal(param).
func (c *compiled) evaluate(ctx context.Context, workflowID string, set map[string]*member, now time.Time) evaluation {
	if c.err != nil {
		return evaluation{err: c.err}
	}
	ctx, cancel := context.WithTimeout(ctx, evaluationTimeout)
	defer cancel()
	ids := make(map[string]int64, len(set))
	for name, m := range set {
		ids[name] = m.seq
	}
	src := &params.SignalSource{Trigger: true, SignalIDs: ids, TriggerParams: map[string]any{},
		Read: func(_ context.Context, ref params.SignalRef) (map[string]any, error) {
			if m := set[ref.Name]; m != nil && m.seq == ref.Seq {
				return m.params, nil
			}
			return nil, fmt.Errorf("%w: signal %s instance %d is not in the set", params.ErrNoSignal, ref.Name, ref.Seq)
		}}
	ctx = params.WithSignals(ctx, src)
	vals, err := params.EvaluateIn(ctx, c.params, params.Scope{Funcs: params.SignalFuncs})
	if err != nil {
		return evaluation{err: fmt.Errorf("params: %w", err)}
	}
	plain := vals.Plain()
	src.TriggerParams = plain
	if c.condition != nil {
		v, err := c.condition.Eval(ctx, sel.MapEnv(plain))
		if err != nil {
			return evaluation{err: fmt.Errorf("condition: %w", err)}
		}
		ok, isBool := v.(bool)
		if !isBool {
			return evaluation{err: fmt.Errorf("condition returned %T, not a boolean", v)}
		}
		if !ok {
			return evaluation{err: fmt.Errorf("condition %q is false", c.conditionText)}
		}
	}
	ev := evaluation{run: true}
	// The request id, as Maestro derives it: from the dedup_expr's value,
	// else from the trigger and the set.
	unique := ""
	if c.dedup != nil {
		v, err := c.dedup.Eval(ctx, sel.MapEnv(plain))
		if err != nil {
			return evaluation{err: fmt.Errorf("dedup_expr: %w", err)}
		}
		unique = fmt.Sprint(v)
	} else {
		unique = executionKey(workflowID, c.uuid, c.names, ids, c.conditionText, c.dedupText)
	}
	ev.requestID = schedule.NameUUID(unique).String()
	ev.initiator = map[string]any{"type": "SIGNAL", "trigger_uuid": c.uuid, "signal_id_map": ids, "depth": 0}
	if len(vals) > 0 {
		ps := make(map[string]any, len(vals))
		for name, v := range vals {
			p := map[string]any{"type": v.Type, "evaluated_result": v.Value, "evaluated_time": now.UnixMilli()}
			if def := c.params[name]; def.Expression != nil {
				p["expression"] = *def.Expression
			} else {
				p["value"] = v.Value
			}
			ps[name] = p
		}
		ev.initiator["params"] = ps
	}
	return ev
}

// executionKey is the JSON Maestro derives a signal trigger start's
// request id from when the trigger has no dedup_expr: the workflow, the
// trigger, the set's signal ids by name in name order, the condition and
// the dedup_expr.
func executionKey(workflowID, uuid string, names []string, ids map[string]int64, condition, dedup string) string {
	b := []byte(`{"workflow_id":`)
	b = appendJSON(b, workflowID)
	b = append(b, `,"trigger_uuid":`...)
	b = appendJSON(b, uuid)
	b = append(b, `,"signal_ids":{`...)
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSON(b, n)
		b = append(b, ':')
		b = appendJSON(b, ids[n])
	}
	b = append(b, '}')
	if condition != "" {
		b = append(b, `,"condition":`...)
		b = appendJSON(b, condition)
	}
	if dedup != "" {
		b = append(b, `,"dedup_expr":`...)
		b = appendJSON(b, dedup)
	}
	return string(append(b, '}'))
}

func appendJSON(b []byte, v any) []byte {
	enc, _ := json.Marshal(v)
	return append(b, enc...)
}

// triggerCache holds compiled triggers by uuid. It is bounded: past
// maxCached entries it starts afresh.
type triggerCache struct {
	mu sync.Mutex
	m  map[string]*compiled
}

const maxCached = 20_000

func newTriggerCache() *triggerCache { return &triggerCache{m: map[string]*compiled{}} }

func (tc *triggerCache) get(uuid string, def json.RawMessage) *compiled {
	tc.mu.Lock()
	c := tc.m[uuid]
	tc.mu.Unlock()
	if c != nil {
		return c
	}
	c = compile(uuid, def)
	tc.mu.Lock()
	if len(tc.m) >= maxCached {
		tc.m = map[string]*compiled{}
	}
	tc.m[uuid] = c
	tc.mu.Unlock()
	return c
}
