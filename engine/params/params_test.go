package params_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

func lit(t workflow.ParamType, v any) workflow.Param { return workflow.LiteralParam(t, v) }

func expr(t workflow.ParamType, e string) workflow.Param { return workflow.ExpressionParam(t, e) }

func str(v string) workflow.Param { return lit(workflow.ParamTypeString, v) }

func long(v int64) workflow.Param { return lit(workflow.ParamTypeLong, json.Number(jsonInt(v))) }

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }

// upstream is a StepLookup over fixed values.
func upstream(m map[string]map[string]any) params.StepLookup {
	return func(step, name string) (any, bool) {
		v, ok := m[step][name]
		return v, ok
	}
}

func TestInterpolation(t *testing.T) {
	t.Parallel()
	steps := upstream(map[string]map[string]any{"up": {"date": "20240101", "n": int64(7)}})
	tests := []struct {
		name string
		defs workflow.Params
		want map[string]any
		err  string
	}{
		{"bare and braced", workflow.Params{"a": str("x"), "b": str("$a-${a}.txt")}, map[string]any{"b": "x-x.txt"}, ""},
		{"escape", workflow.Params{"a": str("x"), "b": str("cost $$5 $$a $$$a")}, map[string]any{"b": "cost $5 $a $x"}, ""},
		{"lonely dollar kept", workflow.Params{"b": str("a $ b $1")}, map[string]any{"b": "a $ b $1"}, ""},
		{"numbers", workflow.Params{"n": long(3), "b": str("n=$n")}, map[string]any{"b": "n=3"}, ""},
		{"workflow param", workflow.Params{"b": str("run ${wf}")}, map[string]any{"b": "run W"}, ""},
		{"upstream at", workflow.Params{"b": str("d=${date@up}")}, map[string]any{"b": "d=20240101"}, ""},
		{"upstream double underscore", workflow.Params{"b": str("d=${up__date}/$up__n")}, map[string]any{"b": "d=20240101/7"}, ""},
		{"string array", workflow.Params{"a": str("x"), "b": lit(workflow.ParamTypeStringArray, []any{"$a", "y"})}, map[string]any{"b": []string{"x", "y"}}, ""},
		{"string map", workflow.Params{"a": str("x"), "b": lit(workflow.ParamTypeStringMap, map[string]any{"k": "<$a>"})}, map[string]any{"b": map[string]string{"k": "<x>"}}, ""},
		{"ordered after its reference", workflow.Params{"z": str("1"), "a": str("$b"), "b": str("$z$z")}, map[string]any{"a": "11"}, ""},
		{"unknown", workflow.Params{"b": str("$nope")}, nil, "unknown param nope"},
		{"unknown step", workflow.Params{"b": str("${x@gone}")}, nil, "not available"},
		{"unclosed", workflow.Params{"b": str("${a")}, nil, "unclosed"},
		{"cycle", workflow.Params{"a": str("$b"), "b": str("$a")}, nil, "cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := params.EvaluateIn(context.Background(), tt.defs, params.Scope{Base: map[string]any{"wf": "W"}, Steps: steps})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				if g, _ := json.Marshal(got[k].Value); string(g) != mustJSON(want) {
					t.Errorf("%s = %s, want %s", k, g, mustJSON(want))
				}
			}
		})
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestUpstreamInExpressions(t *testing.T) {
	t.Parallel()
	steps := upstream(map[string]map[string]any{"up": {"n": int64(20), "s": "hi"}})
	defs := workflow.Params{
		"a": expr(workflow.ParamTypeLong, "params.getFromStep('up', 'n') + 1"),
		"b": expr(workflow.ParamTypeLong, "up__n * 2"),
		"c": expr(workflow.ParamTypeString, "up__s + a"),
	}
	got, err := params.EvaluateIn(context.Background(), defs, params.Scope{Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	if got["a"].Value != int64(21) || got["b"].Value != int64(40) || got["c"].Value != "hi21" {
		t.Fatalf("got %v", got)
	}
	_, err = params.EvaluateIn(context.Background(), workflow.Params{"x": expr(workflow.ParamTypeLong, "params.getFromStep('up', 'zzz')")}, params.Scope{Steps: steps})
	if err == nil || !strings.Contains(err.Error(), "zzz") {
		t.Fatalf("missing upstream param: %v", err)
	}
}

func TestValidator(t *testing.T) {
	t.Parallel()
	ok := lit(workflow.ParamTypeLong, json.Number("5"))
	ok.Validator = "n > 0 && n < 10"
	if _, err := params.Evaluate(context.Background(), workflow.Params{"n": ok}, nil, nil); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.Value = json.Number("50")
	_, err := params.Evaluate(context.Background(), workflow.Params{"n": bad}, nil, nil)
	if !errors.Is(err, params.ErrValidator) {
		t.Fatalf("got %v, want ErrValidator", err)
	}
}

func TestCheckOverrides(t *testing.T) {
	t.Parallel()
	modes := []workflow.ParamMode{"", workflow.ParamModeConstant, workflow.ParamModeImmutable, workflow.ParamModeMutable,
		workflow.ParamModeMutableOnStart, workflow.ParamModeMutableOnStartRestart}
	// allowed[mode] = start, restart, output
	allowed := map[workflow.ParamMode][3]bool{
		"":                                      {true, true, true},
		workflow.ParamModeConstant:              {false, false, false},
		workflow.ParamModeImmutable:             {false, false, false},
		workflow.ParamModeMutable:               {true, true, true},
		workflow.ParamModeMutableOnStart:        {true, false, false},
		workflow.ParamModeMutableOnStartRestart: {true, true, false},
	}
	for _, m := range modes {
		for i, ph := range []params.Phase{params.PhaseStart, params.PhaseRestart, params.PhaseOutput} {
			def := str("a")
			def.Mode = m
			err := params.CheckOverrides(workflow.Params{"p": def}, workflow.Params{"p": str("b")}, ph)
			if got := err == nil; got != allowed[m][i] {
				t.Errorf("mode %q on %s: allowed=%v, want %v (%v)", m, ph, got, allowed[m][i], err)
			}
			if err != nil && !errors.Is(err, params.ErrNotOverridable) {
				t.Errorf("error %v does not wrap ErrNotOverridable", err)
			}
		}
	}
	// New names are fine; reserved names and type changes are not.
	if err := params.CheckOverrides(workflow.Params{}, workflow.Params{"new": str("x")}, params.PhaseRestart); err != nil {
		t.Error(err)
	}
	if err := params.CheckOverrides(nil, workflow.Params{"step_id": str("x")}, params.PhaseStart); !errors.Is(err, params.ErrNotOverridable) {
		t.Errorf("reserved: %v", err)
	}
	if err := params.CheckOverrides(workflow.Params{"p": str("a")}, workflow.Params{"p": long(1)}, params.PhaseStart); err == nil {
		t.Error("type change accepted")
	}
}

func TestStepMergeOrder(t *testing.T) {
	t.Parallel()
	in := params.StepInput{
		WorkflowID: "wf", InstanceID: 4, RunID: 2, StepID: "s1", StepType: "NoOp", AttemptID: 3, UUID: "u-1",
		// Each layer sets "layer" and its own marker; later layers win.
		Injected: workflow.Params{"layer": str("injected"), "inj": str("i"), "typed_over": str("injected")},
		Typed:    workflow.Params{"layer": str("typed"), "typed_over": str("typed"), "step_type": str("mine")},
		Defs: workflow.Params{
			"layer":   str("definition"),
			"defined": str("def"),
			"sum":     expr(workflow.ParamTypeString, "layer + '/' + step_id + '/' + workflow_instance_id + '/' + base"),
			"fixed":   func() workflow.Param { p := str("c"); p.Mode = workflow.ParamModeConstant; return p }(),
			"step_id": str("hijack"), // reserved: ignored
		},
		RunParams: workflow.Params{"defined": str("run"), "extra": str("new")},
		Workflow:  map[string]any{"base": "B", "layer": "workflow"},
	}
	got, err := params.EvaluateStep(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"workflow_id": "wf", "workflow_instance_id": int64(4), "workflow_run_id": int64(2), "step_id": "s1",
		"step_attempt_id": int64(3), "step_instance_uuid": "u-1", "step_type": "NoOp",
		"layer": "definition", "inj": "i", "typed_over": "typed", "defined": "run", "extra": "new",
		"sum": "definition/s1/4/B", "fixed": "c",
	}
	for k, v := range want {
		if got[k].Value != v {
			t.Errorf("%s = %v, want %v", k, got[k].Value, v)
		}
	}
	// A run param may not change a CONSTANT one.
	in.RunParams = workflow.Params{"fixed": str("x")}
	if _, err := params.EvaluateStep(context.Background(), in); !errors.Is(err, params.ErrNotOverridable) {
		t.Fatalf("constant overridden: %v", err)
	}
}

func TestWorkflowDefaults(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	wf := &workflow.Workflow{ID: "w", TimeTriggers: []workflow.TimeTrigger{{Cron: "0 * * * *", Timezone: "America/Los_Angeles"}},
		Params: workflow.Params{
			"day":  expr(workflow.ParamTypeString, "new DateTime(RUN_TS).withZone(DateTimeZone.forID(FIRST_TIME_TRIGGER_TIMEZONE)).toString('yyyyMMdd-HH')"),
			"lock": func() workflow.Param { p := str("a"); p.Mode = workflow.ParamModeImmutable; return p }(),
		}}
	got, err := params.EvaluateWorkflow(context.Background(), params.WorkflowInput{Workflow: wf, Now: now, InstanceID: 9})
	if err != nil {
		t.Fatal(err)
	}
	if got["RUN_TS"].Value != now.UnixMilli() || got["FIRST_TIME_TRIGGER_TIMEZONE"].Value != "America/Los_Angeles" ||
		got["day"].Value != "20240301-04" || got["workflow_id"].Value != "w" || got["workflow_instance_id"].Value != int64(9) {
		t.Fatalf("got %v", got)
	}
	// RUN_TS may be set at start (a backfill); an IMMUTABLE param may not.
	got, err = params.EvaluateWorkflow(context.Background(), params.WorkflowInput{Workflow: wf, Now: now,
		RunParams: workflow.Params{"RUN_TS": long(0)}})
	if err != nil || got["day"].Value != "19691231-16" {
		t.Fatalf("RUN_TS override: %v %v", got["day"], err)
	}
	_, err = params.EvaluateWorkflow(context.Background(), params.WorkflowInput{Workflow: wf, RunParams: workflow.Params{"lock": str("b")}})
	if !errors.Is(err, params.ErrNotOverridable) {
		t.Fatalf("immutable overridden: %v", err)
	}
	_, err = params.EvaluateWorkflow(context.Background(), params.WorkflowInput{Workflow: wf, Phase: params.PhaseRestart,
		RunParams: workflow.Params{"RUN_TS": long(0)}})
	if !errors.Is(err, params.ErrNotOverridable) {
		t.Fatalf("MUTABLE_ON_START RUN_TS changed on restart: %v", err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	if err := params.Check(workflow.Params{"a": expr(workflow.ParamTypeLong, "b + 1"), "b": expr(workflow.ParamTypeLong, "a + 1")}); !errors.Is(err, params.ErrCycle) {
		t.Fatalf("cycle: %v", err)
	}
	if err := params.Check(workflow.Params{"a": str("$b"), "b": expr(workflow.ParamTypeString, "a")}); !errors.Is(err, params.ErrCycle) {
		t.Fatalf("cycle through interpolation: %v", err)
	}
	if err := params.Check(workflow.Params{"a": str("$b"), "b": str("x"), "c": expr(workflow.ParamTypeLong, "((")}); err != nil {
		t.Fatalf("no cycle: %v", err)
	}
}

func TestOutputs(t *testing.T) {
	t.Parallel()
	defs := workflow.Params{
		"m":     str("a"),
		"fixed": func() workflow.Param { p := str("c"); p.Mode = workflow.ParamModeMutableOnStart; return p }(),
		"n":     long(1),
	}
	vals, err := params.EvaluateIn(context.Background(), defs, params.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := params.Outputs(vals, map[string]any{
		"m": "b", "n": json.Number("5"), "new": 2.5, "typed": map[string]any{"type": "LONG", "value": "7"}, "list": []any{"x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	merged, err := params.MergeOutputs(vals, defs, outs)
	if err != nil {
		t.Fatal(err)
	}
	if merged["m"].Value != "b" || merged["n"].Value != int64(5) || merged["new"].Value != 2.5 || merged["typed"].Value != int64(7) ||
		merged["fixed"].Value != "c" {
		t.Fatalf("merged %v", merged)
	}
	outs, _ = params.Outputs(vals, map[string]any{"fixed": "x"})
	if _, err := params.MergeOutputs(vals, defs, outs); !errors.Is(err, params.ErrNotOverridable) {
		t.Fatalf("MUTABLE_ON_START changed by an output: %v", err)
	}
	if _, err := params.Outputs(vals, map[string]any{"n": "not a number"}); err == nil {
		t.Fatal("wrong output type accepted")
	}
}

func TestInterpolateExported(t *testing.T) {
	t.Parallel()
	got, err := params.Interpolate("${h}h$$", map[string]any{"h": int64(3)})
	if err != nil || got != "3h$" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := params.Interpolate("${x@s}", nil); err == nil {
		t.Fatal("step reference resolved")
	}
}

// Maestro's default workflow params, for a manual run and for a run a time
// trigger started (its initiator's zone wins), with the values Maestro's
// expressions give.
func TestMaestroDefaultWorkflowParams(t *testing.T) {
	t.Parallel()
	la := &workflow.Workflow{ID: "w", TimeTriggers: []workflow.TimeTrigger{{Cron: "0 * * * *", Timezone: "America/Los_Angeles"}}}
	cases := []struct {
		name string
		in   params.WorkflowInput
		want map[string]any
	}{
		{"manual run of a workflow whose first trigger is in Los Angeles",
			params.WorkflowInput{Workflow: la, Now: time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)},
			map[string]any{
				"FIRST_TIME_TRIGGER_TIMEZONE": "America/Los_Angeles", "DSL_DEFAULT_TZ": "America/Los_Angeles",
				"WORKFLOW_CRON_TIMEZONE": "America/Los_Angeles", "RUN_TS": int64(1709294400000),
				"TARGET_RUN_DATE": "20240301", "TARGET_RUN_HOUR": "04", "DERIVED_RUN_TS": int64(1709294400000),
				"DERIVED_RUN_DATE_US_PACIFIC": "20240301", "DERIVED_RUN_DATE_US_PACIFIC_MINUS_ONE": "20240229",
				"DERIVED_RUN_DATE_UTC": "20240301", "DERIVED_RUN_DATE_UTC_MINUS_ONE": "20240229", "DERIVED_RUN_DATE_UTC_PLUS_ONE": "20240302",
				"DERIVED_RUN_DATE_UTC_MINUS_ONE_HOUR": "20240301", "DERIVED_RUN_DATE_UTC_PLUS_ONE_HOUR": "20240301",
				"DERIVED_RUN_HOUR_US_PACIFIC": "04", "DERIVED_RUN_HOUR_UTC": "12", "DERIVED_RUN_HOUR_UTC_MINUS_ONE_HOUR": "11",
				"DERIVED_RUN_HOUR_UTC_PLUS_ONE_HOUR": "13", "LOCAL_RUN_DATE": "20240301", "RUN_DATE": "20240301",
				"RUN_DATE_MINUS_1": "20240229", "RUN_DATE_MINUS_7": "20240223",
			}},
		{"a Tokyo trigger fires at 00:30 local: the dates are Tokyo's, DERIVED_RUN_TS the hour",
			params.WorkflowInput{Workflow: la, RunParams: workflow.Params{"RUN_TS": long(1709307000000)}, // 2024-03-01T15:30Z
				Initiator: map[string]any{"type": "TIME", "timezone": "Asia/Tokyo", "trigger_uuid": "u", "trigger_time": int64(1709307000000)}},
			map[string]any{
				"DSL_DEFAULT_TZ": "America/Los_Angeles", "WORKFLOW_CRON_TIMEZONE": "Asia/Tokyo",
				"TARGET_RUN_DATE": "20240302", "TARGET_RUN_HOUR": "00", "DERIVED_RUN_TS": int64(1709305200000),
				"DERIVED_RUN_DATE_UTC": "20240301", "DERIVED_RUN_HOUR_UTC": "15", "DERIVED_RUN_DATE_US_PACIFIC": "20240301",
				"DERIVED_RUN_HOUR_US_PACIFIC": "07", "LOCAL_RUN_DATE": "20240302", "RUN_DATE": "20240301",
			}},
		{"no trigger: UTC",
			params.WorkflowInput{Workflow: &workflow.Workflow{ID: "w"}, Now: time.Date(2024, 12, 31, 23, 59, 0, 0, time.UTC)},
			map[string]any{"DSL_DEFAULT_TZ": "UTC", "WORKFLOW_CRON_TIMEZONE": "UTC", "TARGET_RUN_DATE": "20241231",
				"TARGET_RUN_HOUR": "23", "DERIVED_RUN_DATE_UTC_PLUS_ONE_HOUR": "20250101", "DERIVED_RUN_HOUR_UTC_PLUS_ONE_HOUR": "00"}},
		{"a run param overriding WORKFLOW_CRON_TIMEZONE flows into the dates",
			params.WorkflowInput{Workflow: la, Now: time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC),
				RunParams: workflow.Params{"WORKFLOW_CRON_TIMEZONE": str("Asia/Kolkata")}},
			map[string]any{"WORKFLOW_CRON_TIMEZONE": "Asia/Kolkata", "TARGET_RUN_HOUR": "17", "LOCAL_RUN_DATE": "20240301"}},
	}
	for _, c := range cases {
		got, err := params.EvaluateWorkflow(context.Background(), c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for k, v := range c.want {
			if got[k].Value != v {
				t.Errorf("%s: %s = %v (%T), want %v", c.name, k, got[k].Value, got[k].Value, v)
			}
		}
	}
	// Every default is MUTABLE_ON_START: set at start, not on restart.
	defs, err := params.WorkflowDefs(params.WorkflowInput{Workflow: la})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"TARGET_RUN_DATE", "DERIVED_RUN_TS", "RUN_DATE_MINUS_7", "WORKFLOW_CRON_TIMEZONE"} {
		if defs[name].Mode != workflow.ParamModeMutableOnStart {
			t.Errorf("%s mode %s", name, defs[name].Mode)
		}
	}
}

// MAP members are evaluated against the enclosing scope, never their
// siblings, as Maestro's ParamEvaluator does: a member expression naming
// e1 reads the top-level e1 even when a sibling member is called e1.
func TestMapMembersReadTheEnclosingScope(t *testing.T) {
	t.Parallel()
	top := expr(workflow.ParamTypeMap, "m = new Map(); m.put('bar', 123L); return m;")
	p1 := lit(workflow.ParamTypeMap, map[string]workflow.Param{
		"e1": expr(workflow.ParamTypeString, "'bar';"),
		"e2": expr(workflow.ParamTypeLong, "e1.get('bar');"),
		"s":  str("n=${n}"),
		"n":  long(5),
	})
	got, err := params.Evaluate(context.Background(), workflow.Params{"e1": top, "p1": p1, "n": long(7)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := got["p1"].Value.(map[string]any)
	if m["e1"] != "bar" || m["e2"] != int64(123) || m["s"] != "n=7" || m["n"] != int64(5) {
		t.Fatalf("p1 = %#v, want e1 bar, e2 123 (top-level e1), s n=7 (top-level n), n 5", m)
	}
	// A member naming only a sibling finds nothing.
	_, err = params.Evaluate(context.Background(), workflow.Params{"p": lit(workflow.ParamTypeMap, map[string]workflow.Param{
		"a": long(1), "b": expr(workflow.ParamTypeLong, "a + 1"),
	})}, nil, nil)
	if err == nil {
		t.Fatal("a member reading a sibling member was evaluated; Maestro binds only the enclosing scope")
	}
}

// A MAP member that fails to evaluate names itself inside the map's
// error, whether it is a literal (evaluated in the enclosing scope in
// place) or an expression.
func TestMapMemberErrorsNameTheMember(t *testing.T) {
	t.Parallel()
	for what, member := range map[string]workflow.Param{
		"literal":    str("${missing_param}"),
		"expression": expr(workflow.ParamTypeLong, "missing_param + 1"),
	} {
		_, err := params.Evaluate(context.Background(), workflow.Params{"outer": lit(workflow.ParamTypeMap, map[string]workflow.Param{
			"ok": long(1), "bad": member,
		})}, nil, nil)
		var pe *params.Error
		if !errors.As(err, &pe) || pe.Param != "outer" || !strings.Contains(err.Error(), "bad") {
			t.Errorf("%s member: %v, want an error of outer naming bad", what, err)
		}
	}
}

// A scope's Values are read as its Base is, in expressions, interpolations
// and a MAP's members, under Base and under the defs evaluated.
func TestScopeValuesReadInPlace(t *testing.T) {
	t.Parallel()
	vals := params.Values{
		"x": {Type: workflow.ParamTypeLong, Value: int64(4)},
		"s": {Type: workflow.ParamTypeString, Value: "from-values"},
		"y": {Type: workflow.ParamTypeLong, Value: int64(100)},
	}
	defs := workflow.Params{
		"sum": expr(workflow.ParamTypeLong, "x + y"),
		"msg": str("s=${s}"),
		"m":   lit(workflow.ParamTypeMap, map[string]workflow.Param{"double": expr(workflow.ParamTypeLong, "x * 2")}),
		"y":   long(1), // shadows the values' y
	}
	got, err := params.EvaluateIn(context.Background(), defs, params.Scope{Values: vals, Base: map[string]any{"s": "from-base"}})
	if err != nil {
		t.Fatal(err)
	}
	if got["sum"].Value != int64(5) {
		t.Errorf("sum = %v, want 5 (x from the values, y from the defs)", got["sum"].Value)
	}
	if got["msg"].Value != "s=from-base" {
		t.Errorf("msg = %v, want s=from-base (Base shadows Values)", got["msg"].Value)
	}
	if m, _ := got["m"].Value.(map[string]any); m["double"] != int64(8) {
		t.Errorf("m = %#v, want double 8 (a member reads the values)", got["m"].Value)
	}
	if _, ok := got["x"]; ok {
		t.Error("a value of the scope was returned as evaluated")
	}
}

// A validator that reads an upstream step checks each evaluation against
// that evaluation's upstream, not the first one's: a program compiled with
// functions bound to one attempt's upstream must not serve another.
func TestValidatorReadsEachEvaluationsUpstream(t *testing.T) {
	t.Parallel()
	def := lit(workflow.ParamTypeLong, json.Number("5"))
	def.Validator = "param < params.getFromStep('up', 'limit')"
	defs := workflow.Params{"n": def}
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{10, true}, {3, false}, {10, true}, {4, false}} {
		steps := upstream(map[string]map[string]any{"up": {"limit": tc.limit}})
		_, err := params.EvaluateIn(context.Background(), defs, params.Scope{Steps: steps})
		if tc.ok && err != nil {
			t.Fatalf("limit %d: %v", tc.limit, err)
		}
		if !tc.ok && !errors.Is(err, params.ErrValidator) {
			t.Fatalf("limit %d: got %v, want ErrValidator", tc.limit, err)
		}
	}
}

// TestRunParamsKeepTheDefinitionsValidator: a run param (or a step's run
// param) that only gives a value is still checked by the validator of the
// param it overrides, as Maestro merges them; one that brings its own
// validator is checked by that instead.
func TestRunParamsKeepTheDefinitionsValidator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	guarded := long(3)
	guarded.Validator = "param > 0"
	wf := &workflow.Workflow{ID: "wf", Params: workflow.Params{"n": guarded}}
	start := func(n workflow.Param) (params.Values, error) {
		return params.EvaluateWorkflow(ctx, params.WorkflowInput{Workflow: wf, Now: time.Now(), RunParams: workflow.Params{"n": n}})
	}
	if _, err := start(long(-1)); !errors.Is(err, params.ErrValidator) {
		t.Fatalf("run param n = -1 over a validator param > 0: got %v, want ErrValidator", err)
	}
	got, err := start(long(5))
	if err != nil {
		t.Fatal(err)
	}
	if got["n"].Value != int64(5) {
		t.Fatalf("n = %v, want 5", got["n"].Value)
	}
	own := long(-1)
	own.Validator = "param < 0"
	if _, err := start(own); err != nil {
		t.Fatalf("a run param with its own validator: %v", err)
	}

	step := func(n workflow.Param) error {
		_, err := params.EvaluateStep(ctx, params.StepInput{WorkflowID: "wf", InstanceID: 1, RunID: 1, StepID: "s", StepType: "NoOp",
			AttemptID: 1, UUID: "u", Defs: workflow.Params{"n": guarded}, RunParams: workflow.Params{"n": n}})
		return err
	}
	if err := step(long(-1)); !errors.Is(err, params.ErrValidator) {
		t.Fatalf("step run param n = -1 over a validator param > 0: got %v, want ErrValidator", err)
	}
	if err := step(long(7)); err != nil {
		t.Fatal(err)
	}
}

// TestRunParamsMergeIntoMaps: a run param of a literal MAP or STRING_MAP
// merges into the defined one member by member, its own members winning,
// as Maestro merges run params; the definition's other members stay.
func TestRunParamsMergeIntoMaps(t *testing.T) {
	t.Parallel()
	wf := &workflow.Workflow{ID: "wf", Params: workflow.Params{
		"limits": {Type: workflow.ParamTypeMap, Value: map[string]workflow.Param{"max": long(3), "min": long(1)}},
		"labels": {Type: workflow.ParamTypeStringMap, Value: map[string]any{"team": "data", "tier": "gold"}},
	}}
	got, err := params.EvaluateWorkflow(context.Background(), params.WorkflowInput{Workflow: wf, Now: time.Now(), RunParams: workflow.Params{
		"limits": {Type: workflow.ParamTypeMap, Value: map[string]workflow.Param{"max": long(5)}},
		"labels": {Type: workflow.ParamTypeStringMap, Value: map[string]any{"tier": "silver"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if limits, _ := got["limits"].Value.(map[string]any); limits["max"] != int64(5) || limits["min"] != int64(1) {
		t.Errorf("limits = %v, want max 5 (the run's) and min 1 (the definition's)", got["limits"].Value)
	}
	if labels, _ := got["labels"].Value.(map[string]string); labels["tier"] != "silver" || labels["team"] != "data" {
		t.Errorf("labels = %#v, want tier silver (the run's) and team data (the definition's)", got["labels"].Value)
	}
}
