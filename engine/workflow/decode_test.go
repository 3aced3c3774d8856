package workflow

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestSamplesAreAccepted(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.*") // the samples; not testdata/fuzz or testdata/hostile
	if err != nil || len(files) < 8 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	// backfill.yaml is the seed's, with a Notebook step (its notebook
	// block a STRING_MAP, as the YAML DSL writes it).
	v := Validator{CheckExpression: trivialCheck}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data := readFile(t, f)
			decode := DecodeJSON
			if strings.HasSuffix(f, ".yaml") {
				decode = DecodeYAML
			}
			d, err := decode(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := v.Validate(d); err != nil {
				t.Fatalf("validate: %v", err)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.json")
	inline := map[string]string{
		"empty-blocks": `{"workflow":{"id":"w","params":{},"tags":[],"steps":[{"step":{"id":"a","type":"NoOp","transition":{},"params":{}}}]}}`,
		"short-forms": `{"properties":{"owner":"o","run_strategy":7,"access_control":{"readers":["x"]}},"workflow":{"id":"w","timeout":100,
			"tags":["plain",{"name":"obj"},{"name":"attrs","namespace":"PLATFORM","creator":{"name":"x"}}],
			"steps":[{"step":{"id":"a","type":"Sleep","sleep_seconds":"2h","timeout":"1d 2h","tags":["t"]}}]}}`,
		"nested-map-param": `{"workflow":{"id":"w","steps":[{"foreach":{"id":"f","params":{"loop_params":{"type":"MAP","value":{
			"i":{"type":"LONG_ARRAY","value":[1,2,3]},"m":{"type":"MAP","value":{"deep":{"type":"STRING","value":"x"}}}}}},
			"steps":[{"while":{"id":"w1","condition":"x < 1","steps":[{"step":{"id":"s","type":"NoOp"}}]}}]}}]}}`,
		"numbers-kept": `{"workflow":{"id":"w","params":{"d":{"type":"DOUBLE","value":1.50},"e":{"type":"DOUBLE_ARRAY","value":[1e3,2.0]}},
			"steps":[{"step":{"id":"a","type":"NoOp"}}]}}`,
	}
	cases := map[string][]byte{}
	for _, f := range files {
		cases[filepath.Base(f)] = readFile(t, f)
	}
	for name, doc := range inline {
		cases[name] = []byte(doc)
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, err := DecodeJSON(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !equivalentJSON(generic(t, data), generic(t, out), "") {
				t.Fatalf("round trip changed the document\n in: %s\nout: %s", compact(t, data), out)
			}
			// Encoding is a fixed point: decode(encode(x)) encodes to the same bytes.
			d2, err := DecodeJSON(out)
			if err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			out2, _ := json.Marshal(d2)
			if !bytes.Equal(out, out2) {
				t.Fatalf("encoding is not stable\n 1: %s\n 2: %s", out, out2)
			}
		})
	}
}

func compact(t *testing.T, data []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestDecodeCanonicalisesEnums(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, `{"properties":{"run_strategy":"strict_sequential"},"workflow":{"id":"w","criticality":"low",
		"params":{"p":{"type":"long","value":1,"mode":"constant"}},
		"steps":[{"step":{"id":"a","type":"noop","failure_mode":"ignore_failure",
			"retry_policy":{"backoff":{"type":"fixed_backoff"}},"tags":[{"name":"t","namespace":"user_defined"}]}}]}}`)
	st := d.Workflow.Steps[0].Step
	got := []string{
		string(d.Properties.RunStrategy.Rule), string(d.Workflow.Criticality), string(d.Workflow.Params["p"].Type),
		string(d.Workflow.Params["p"].Mode), string(st.Type), string(st.FailureMode), string(st.RetryPolicy.Backoff.Type),
		string(st.Tags[0].Namespace),
	}
	want := []string{"STRICT_SEQUENTIAL", "LOW", "LONG", "CONSTANT", "NoOp", "IGNORE_FAILURE", "FIXED_BACKOFF", "USER_DEFINED"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		doc   string
		wants []want
	}{
		{
			name:  "unknown git_info field",
			doc:   `{"workflow":{"id":"w","steps":[]},"git_info":{"sha":"abc","timestamp1":1}}`,
			wants: []want{{"git_info.timestamp1", "unknown field"}},
		},
		{
			name: "unknown fields at every level",
			doc: `{"properties":{"ownr":"x","run_strategy":{"rule":"PARALLEL","concurrency":3}},
				"workflow":{"id":"w","stepz":[],"steps":[
				{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"},"succesors":{}},
					"retry_policy":{"error_limit":1,"backoff":{"type":"FIXED_BACKOFF","delay":3}},
					"params":{"p":{"type":"LONG","value":1,"default":2}}}},
				{"foreach":{"id":"f","loop":1,"steps":[{"while":{"id":"w2","cond":"x","steps":[]}}]}},
				{"subworkflow":{"id":"s","retry_policy":{}}}
			]}}`,
			wants: []want{
				{"properties.ownr", "unknown field"},
				{"properties.run_strategy.concurrency", "unknown field"},
				{"workflow.stepz", "unknown field"},
				{"workflow.steps[0].step.transition.succesors", "unknown field"},
				{"workflow.steps[0].step.retry_policy.error_limit", "unknown field"},
				{"workflow.steps[0].step.retry_policy.backoff.delay", "unknown field"},
				{"workflow.steps[0].step.params.p.default", "unknown field"},
				{"workflow.steps[1].foreach.loop", "unknown field"},
				{"workflow.steps[1].foreach.steps[0].while.cond", "unknown field"},
				{"workflow.steps[2].subworkflow.retry_policy", "unknown field"},
			},
		},
		{
			name: "unknown fields in triggers and signals",
			doc: `{"workflow":{"id":"w","time_triggers":[{"cron":"0 * * * *","tz":"UTC"}],
				"signal_triggers":[{"definitions":{"s":{"match_params":{"k":{"value":1,"operator":"=","op":1}},"keys":[]}}}],
				"steps":[{"step":{"id":"a","type":"NoOp",
					"signal_dependencies":[{"name":"x","match_params":{"k":{"param":{"type":"LONG","value":1},"operator":"=","extra":true}}}],
					"signal_outputs":[{"name":"y","params":{},"body":{}}]}}]}}`,
			wants: []want{
				{"workflow.time_triggers[0].tz", "unknown field"},
				{"workflow.signal_triggers[0].definitions.s.match_params.k.op", "unknown field"},
				{"workflow.signal_triggers[0].definitions.s.keys", "unknown field"},
				{"workflow.steps[0].step.signal_dependencies[0].match_params.k.extra", "unknown field"},
				{"workflow.steps[0].step.signal_outputs[0].body", "unknown field"},
			},
		},
		{
			name: "wrong JSON types",
			doc: `{"is_active":"yes","properties":{"step_concurrency":"ten","run_strategy":true,"owner":3},
				"workflow":{"id":7,"tags":[1],"timeout":true,"instance_step_concurrency":1.5,"steps":{"a":1}}}`,
			wants: []want{
				{"is_active", "expected a boolean, got string"},
				{"properties.step_concurrency", "expected a number, got string"},
				{"properties.run_strategy", "expected a rule name, a number or an object, got boolean"},
				{"properties.owner", "expected a user name or an owner object, got number"},
				{"workflow.id", "expected a string, got number"},
				{"workflow.tags[0]", "expected a tag name or a tag object, got number"},
				{"workflow.timeout", "expected a number of seconds or a duration string, got boolean"},
				{"workflow.instance_step_concurrency", "expected an integer, got 1.5"},
				{"workflow.steps", "expected an array, got object"},
			},
		},
		{
			name: "step wrapper shape",
			doc: `{"workflow":{"id":"w","steps":[{},{"template":{"id":"t"}},
				{"step":{"id":"a","type":"NoOp"},"foreach":{"id":"b","steps":[]}},"oops"]}}`,
			wants: []want{
				{"workflow.steps[0]", "a step must be one of step, subworkflow, foreach or while"},
				{"workflow.steps[1].template", "unknown field"},
				{"workflow.steps[2]", "exactly one of step, subworkflow, foreach or while, got step, foreach"},
				{"workflow.steps[3]", "expected an object, got string"},
			},
		},
		{
			name: "duplicate fields",
			doc:  `{"workflow":{"id":"a","id":"b","steps":[{"step":{"id":"x","type":"NoOp","transition":{"successors":{"y":"true","y":"false"}}}}]}}`,
			wants: []want{
				{"workflow.id", "duplicate field"},
				{"workflow.steps[0].step.transition.successors.y", "duplicate field"},
			},
		},
		{
			name:  "keys that are not plain are bracketed",
			doc:   `{"workflow":{"id":"w","steps":[{"step":{"id":"a","type":"NoOp","params":{"job.5":{"type":"LONG","value":1,"x":0}}}}]}}`,
			wants: []want{{`workflow.steps[0].step.params["job.5"].x`, "unknown field"}},
		},
		{
			name:  "integer overflow",
			doc:   `{"workflow":{"id":"w","instance_step_concurrency":99999999999999999999,"steps":[]}}`,
			wants: []want{{"workflow.instance_step_concurrency", "out of range"}},
		},
		{
			name:  "top level must be an object",
			doc:   `[1,2]`,
			wants: []want{{"", "expected an object, got array"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := DecodeJSON([]byte(tc.doc))
			if d != nil {
				t.Errorf("got a definition along with the error")
			}
			assertProblems(t, err, tc.wants...)
		})
	}
}

func TestDecodeMalformedJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		path string
		msg  string
	}{
		{"empty", "  \n", "", "empty document"},
		{"truncated", `{"workflow":{"id":"w","steps":[{"step":{"id":"a"`, "workflow.steps[0].step", "line 1, column 49 (offset 48): unexpected end of input"},
		{"bad token", "{\n  \"workflow\": {\n    \"id\": wf\n  }\n}", "workflow.id", "line 3, column 11 (offset 28): unexpected character 'w'"},
		{"trailing comma", `{"workflow":{"id":"w",}}`, "workflow", "expected a field name"},
		{"missing colon", `{"workflow" {}}`, "", "expected ':' after field name"},
		{"trailing data", `{"workflow":{}} {}`, "", "unexpected data after the top-level value"},
		{"bad number", `{"workflow":{"instance_step_concurrency":01}}`, "workflow", "expected ',' or '}'"},
		{"bad escape", `{"workflow":{"id":"\x"}}`, "workflow.id", "invalid escape sequence"},
		{"control char", "{\"workflow\":{\"id\":\"a\tb\"}}", "workflow.id", "control character in string"},
		{"array", `{"workflow":{"steps":[1 2]}}`, "workflow.steps", "expected ',' or ']'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeJSON([]byte(tc.doc))
			ps := problemsOf(t, err)
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1:\n%s", len(ps), formatProblems(ps))
			}
			if ps[0].Path != tc.path || !strings.Contains(ps[0].Message, tc.msg) || !strings.Contains(ps[0].Message, "malformed JSON") {
				t.Fatalf("got %s, want %s: ...%s...", ps[0], tc.path, tc.msg)
			}
		})
	}
}

func TestDeepNestingIsRefused(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	_, err := DecodeJSON([]byte(doc))
	ps := problemsOf(t, err)
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "nesting deeper than") {
		t.Fatalf("got %v", ps)
	}
}

func TestUnmarshalJSONIsStrict(t *testing.T) {
	t.Parallel()
	var d Definition
	if err := json.Unmarshal([]byte(`{"workflow":{"id":"w","steps":[],"bogus":1}}`), &d); err == nil ||
		!strings.Contains(err.Error(), "workflow.bogus: unknown field") {
		t.Fatalf("err = %v", err)
	}
	if err := json.Unmarshal(readFile(t, "testdata/dag.json"), &d); err != nil || d.Workflow.ID != "orders.daily-rollup" {
		t.Fatalf("err = %v, id = %q", err, d.Workflow.ID)
	}
	var n StepNode
	if err := json.Unmarshal([]byte(`{"step":{"id":"a","type":"NoOp","timeout":"1h"}}`), &n); err != nil || n.Kind() != StepKindStep {
		t.Fatalf("err = %v kind = %q", err, n.Kind())
	}
	var p Param
	if err := json.Unmarshal([]byte(`{"type":"LONG","valu":1}`), &p); err == nil || !strings.Contains(err.Error(), "valu: unknown field") {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeProperties(t *testing.T) {
	t.Parallel()
	p, err := DecodeProperties([]byte(`{"owner":{"name":"a","email":"a@x"},"run_strategy":{"rule":"parallel","workflow_concurrency":0},"time_trigger_disabled":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Owner.Name != "a" || string(p.Owner.Extra["email"]) != `"a@x"` || p.RunStrategy.Concurrency() != 0 || !*p.TimeTriggerDisabled {
		t.Fatalf("decoded %+v", p)
	}
	if err := (Validator{}).ValidateProperties(p); err != nil {
		t.Fatal(err)
	}
	_, err = DecodeProperties([]byte(`{"owner":"a","run_stratgy":"x"}`))
	assertProblems(t, err, want{"run_stratgy", "unknown field"})
}

func TestPropertiesMerge(t *testing.T) {
	t.Parallel()
	cur, _ := DecodeProperties([]byte(`{"owner":"a","run_strategy":"sequential","step_concurrency":5,"tags":["x"]}`))
	change, _ := DecodeProperties([]byte(`{"owner":"b","time_trigger_disabled":true}`))
	got := cur.Merge(change)
	if got.Owner.Name != "b" || got.RunStrategy.Rule != RunStrategySequential || *got.StepConcurrency != 5 ||
		!*got.TimeTriggerDisabled || len(got.Tags) != 1 {
		t.Fatalf("merged %+v", got)
	}
	if cur.Owner.Name != "a" {
		t.Fatal("merge changed the current snapshot")
	}
	if (*Properties)(nil).Merge(change).Owner.Name != "b" {
		t.Fatal("merge into nil")
	}
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	a := mustDecode(t, `{"properties":{"owner":"x"},"workflow":{"id":"w","name":"n","params":{"b":{"type":"LONG","value":1},"a":{"value":"<&>","type":"STRING"}},
		"steps":[{"step":{"type":"NoOp","id":"s1","transition":{"successors":{"s3":"x < 1","s2":"true"}}}},{"step":{"id":"s2","type":"NoOp"}},{"step":{"id":"s3","type":"NoOp"}}]}}`)
	b := mustDecode(t, `{"workflow":{"steps":[{"step":{"id":"s1","transition":{"successors":{"s2":"true","s3":"x < 1"}},"type":"NoOp"}},{"step":{"type":"NoOp","id":"s2"}},{"step":{"id":"s3","type":"NoOp"}}],
		"params":{"a":{"type":"STRING","value":"<&>"},"b":{"value":1,"type":"LONG"}},"name":"n","id":"w"},"properties":{"owner":"y"},"is_active":false}`)
	ca, err := a.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := b.Canonical()
	if !bytes.Equal(ca, cb) {
		t.Fatalf("canonical forms differ:\n%s\n%s", ca, cb)
	}
	const wantJSON = `{"workflow":{"id":"w","name":"n","params":{"a":{"type":"STRING","value":"<&>"},"b":{"type":"LONG","value":1}},"steps":[{"step":{"id":"s1","transition":{"successors":{"s2":"true","s3":"x < 1"}},"type":"NoOp"}},{"step":{"id":"s2","type":"NoOp"}},{"step":{"id":"s3","type":"NoOp"}}]}}`
	if string(ca) != wantJSON {
		t.Fatalf("canonical =\n%s\nwant\n%s", ca, wantJSON)
	}
	c := mustDecode(t, strings.Replace(string(cb), `"x < 1"`, `"x <= 1"`, 1))
	cc, _ := c.Canonical()
	if bytes.Equal(ca, cc) {
		t.Fatal("a changed condition left the canonical form unchanged")
	}
	// Defaults are not filled in: an explicit default is a different intent.
	d := mustDecode(t, strings.Replace(string(cb), `"id":"s3",`, `"id":"s3","failure_mode":"FAIL_AFTER_RUNNING",`, 1))
	cd, _ := d.Canonical()
	if bytes.Equal(ca, cd) {
		t.Fatal("an explicit failure mode left the canonical form unchanged")
	}
	pa, _ := a.Properties.Canonical()
	if string(pa) != `{"owner":"x"}` {
		t.Fatalf("properties canonical = %s", pa)
	}
}

func TestMarshalIndentDoesNotEscapeConditions(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, string(readFile(t, "testdata/conditional.json")))
	out, err := d.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"rows < threshold"`)) {
		t.Fatalf("conditions escaped:\n%s", out)
	}
}

func TestStepNodeAccessors(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, string(readFile(t, "testdata/foreach.json")))
	steps := d.Workflow.Steps
	if steps[0].Kind() != StepKindStep || steps[1].Kind() != StepKindForeach {
		t.Fatalf("kinds %q %q", steps[0].Kind(), steps[1].Kind())
	}
	if steps[1].ID() != "sweep" || steps[1].Type() != "foreach" || steps[1].RetryPolicy() != nil {
		t.Fatalf("foreach accessors: %q %q", steps[1].ID(), steps[1].Type())
	}
	inner, kind := steps[1].Children()
	if kind != StepKindForeach || len(inner) != 2 || inner[0].RetryPolicy() == nil {
		t.Fatalf("children %v %q", inner, kind)
	}
	if got := d.Workflow.AllStepIDs(); strings.Join(got, ",") != "prepare,sweep,train,evaluate" {
		t.Fatalf("AllStepIDs = %v", got)
	}
	if c := steps[0].Common(); c.EffectiveFailureMode() != FailureModeFailAfterRunning || c.Successors()["sweep"] != "true" {
		t.Fatalf("common %+v", c)
	}
	var empty StepNode
	if empty.Common() != nil || empty.ID() != "" || empty.Kind() != "" {
		t.Fatal("empty node accessors")
	}
	lp, _ := steps[1].Foreach.Params[ParamLoopParams].MapValue()
	if lp["lr"].Type != ParamTypeDoubleArray || !lp["lr"].IsLiteral() || lp["day"].IsLiteral() {
		t.Fatalf("loop params %+v", lp)
	}
}

func TestScalars(t *testing.T) {
	t.Parallel()
	durations := []struct {
		in   string
		secs int64
		err  bool
	}{
		{"100s", 100, false}, {"2h", 7200, false}, {"1d", 86400, false}, {"1d 2h 3min 4s", 93784, false},
		{"90", 90, false}, {"30 minutes", 1800, false}, {"1H30M", 5400, false}, {"", 0, true}, {"5 weeks", 0, true},
		{"abc", 0, true}, {"10s5", 0, true},
	}
	for _, tc := range durations {
		t.Run("duration "+tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDuration(tc.in)
			if (err != nil) != tc.err || (!tc.err && int64(got.Seconds()) != tc.secs) {
				t.Fatalf("ParseDuration(%q) = %v, %v", tc.in, got, err)
			}
		})
	}
	if _, err := DurationText("${t}s").Resolve(); err != ErrNeedsParams {
		t.Fatalf("param duration: %v", err)
	}
	if v, err := LongText("12").Resolve(); err != nil || v != 12 {
		t.Fatalf("LongText: %v %v", v, err)
	}
	if _, err := LongText("x").Resolve(); err == nil {
		t.Fatal("LongText(x) resolved")
	}
	if _, err := LongText("$x").Resolve(); err != ErrNeedsParams {
		t.Fatalf("LongText($x): %v", err)
	}
}

// Top-level fields other than properties, workflow, is_active and git_info
// are the version's metadata, as in Maestro: kept and written back.
func TestDecodeKeepsPushMetadata(t *testing.T) {
	t.Parallel()
	doc := `{"workflow":{"id":"w","steps":[{"step":{"id":"a","type":"NoOp"}}]},"git_info":{"branch":"main","timestamp":1627332490},
		"source":"s3://code/source.jar","api_version":"3.00","additional_meta":{"n":1}}`
	d, err := DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if d.GitInfo == nil || *d.GitInfo.Branch != "main" || *d.GitInfo.Timestamp != 1627332490 {
		t.Errorf("git_info %+v", d.GitInfo)
	}
	if len(d.Extra) != 3 || string(d.Extra["source"]) != `"s3://code/source.jar"` || string(d.Extra["additional_meta"]) != `{"n":1}` {
		t.Errorf("extra %v", d.Extra)
	}
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"git_info":{"branch":"main","timestamp":1627332490}`, `"api_version":"3.00"`, `"additional_meta":{"n":1}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s lacks %s", out, want)
		}
	}
	reserved, err := DecodeJSON([]byte(`{"workflow":{"id":"w","steps":[{"step":{"id":"a","type":"NoOp"}}]},"workflow_version_id":3}`))
	if err != nil {
		t.Fatal(err)
	}
	assertProblems(t, Validator{}.Validate(reserved), want{"workflow_version_id", "set by Maestro"})
}
