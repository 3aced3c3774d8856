package workflow

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBackfillYAMLBecomesTheModel(t *testing.T) {
	t.Parallel()
	d, err := DecodeYAML(readFile(t, "testdata/backfill.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"workflow":{"id":"demo.pipeline","steps":[` +
		`{"step":{"id":"step1","params":{"dates":{"expression":"return new int[]{20220101,20220102,20220103};","type":"LONG_ARRAY"}},"transition":{"successors":{"step2":"true"}},"type":"NoOp"}},` +
		`{"foreach":{"id":"step2","params":{"loop_params":{"type":"MAP","value":{"date":{"expression":"params.getFromStep('step1', 'dates')","type":"LONG_ARRAY"}}}},"steps":[` +
		`{"step":{"id":"backfill","params":{"notebook":{"type":"STRING_MAP","value":{"arg1":"$date","input_path":"s3://path/to/notebook.ipynb"}}},"type":"Notebook"}}]}}]}}`
	if string(got) != want {
		t.Fatalf("model =\n%s\nwant\n%s", got, want)
	}
	if d.Properties != nil || d.IsActive != nil {
		t.Fatal("defaults were filled in")
	}
}

func TestConditionalYAML(t *testing.T) {
	t.Parallel()
	d, err := DecodeYAML(readFile(t, "testdata/conditional.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	w := d.Workflow
	steps := map[string]*StepNode{}
	WalkSteps(w.Steps, func(_ string, n *StepNode, _ int) bool { steps[n.ID()] = n; return true })
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"owner", d.Properties.Owner.Name, "analytics"},
		{"run strategy", d.Properties.RunStrategy.Rule, RunStrategyParallel},
		{"workflow concurrency", d.Properties.RunStrategy.Concurrency(), int64(3)},
		{"timeout", w.Timeout.Text, "2h"},
		{"tags", strings.Join(w.Tags.Names(), ","), "readout"},
		{"threshold", w.Params["threshold"].Type, ParamTypeLong},
		{"ratio", w.Params["ratio"].Type, ParamTypeDouble},
		{"enabled", w.Params["enabled"].Type, ParamTypeBoolean},
		{"regions", w.Params["regions"].Type, ParamTypeStringArray},
		{"labels", w.Params["labels"].Type, ParamTypeStringMap},
		{"month type", w.Params["month"].Type, ParamTypeLong},
		{"month mode", w.Params["month"].Mode, ParamModeConstant},
		{"month expression", *w.Params["month"].Expression, "new DateTime().getMonthOfYear()"},
		{"type normalised", steps["extract"].Step.Type, StepTypeNoOp},
		{"dag map", steps["extract"].Common().Successors()["check"], "true"},
		{"IF", steps["check"].Common().Successors()["remediate"], "rows < threshold"},
		{"OTHERWISE", steps["check"].Common().Successors()["publish"], "!((rows < threshold))"},
		{"retry policy", steps["check"].Step.RetryPolicy.ErrorRetryLimit.Value, int64(1)},
		{"sleep config", string(steps["remediate"].Step.Config["sleep_seconds"]), "10"},
		{"failure mode", steps["remediate"].Common().FailureMode, FailureModeIgnoreFailure},
		{"ref type", steps["publish"].Common().Params["copied"].Type, ParamTypeLong},
		{"ref expression", *steps["publish"].Common().Params["copied"].Expression, "params.getFromStep('extract', 'rows')"},
		{"interpolated refs", *steps["publish"].Common().Params["summary"].Expression,
			"'rows=' + params.getFromStep('extract', 'rows') + ' of ' + params.getFromStep('extract', 'rows')"},
		{"fan-out from dag map", len(steps["publish"].Common().Successors()), 3},
		{"subworkflow id", steps["notify"].Common().Params[ParamSubworkflowID].Value, "notifier"},
		{"subworkflow version", steps["notify"].Common().Params[ParamSubworkflowVersion].Value, "latest"},
		{"subworkflow sync", *steps["notify"].Subworkflow.Sync, false},
		{"subworkflow extra param", steps["notify"].Common().Params["channel"].Value, "email"},
		{"while condition", steps["settle"].While.Condition, "n < 3"},
		{"range", *mustMap(t, steps["per-hour"].Common().Params[ParamLoopParams])["hour"].Expression, "Util.intsBetween(0, 24, 1);"},
		{"parallel dag", steps["hourly"].Common().Transition == nil, true},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.got != c.want {
				t.Fatalf("got %v (%T), want %v (%T)", c.got, c.got, c.want, c.want)
			}
		})
	}
}

func mustMap(t *testing.T, p Param) map[string]Param {
	t.Helper()
	m, ok := p.MapValue()
	if !ok {
		t.Fatalf("not a MAP literal: %+v", p)
	}
	return m
}

func TestYAMLParamInference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key, value string
		want       string
	}{
		{"n", "15", `{"value":15,"type":"LONG"}`},
		{"n", "0x1F", `{"value":31,"type":"LONG"}`},
		{"n", "00", `{"value":0,"type":"LONG"}`},   // not JSON's invalid 00
		{"n", "017", `{"value":15,"type":"LONG"}`}, // octal, as yaml.v3 reads it
		{"n", "-01", `{"value":-1,"type":"LONG"}`},
		{"n", "+5", `{"value":5,"type":"LONG"}`},
		{"n", "1_000", `{"value":1000,"type":"LONG"}`},
		{"f", "1.5", `{"value":1.5,"type":"DOUBLE"}`},
		{"f", ".5", `{"value":0.5,"type":"DOUBLE"}`},
		{"b", "true", `{"value":true,"type":"BOOLEAN"}`},
		{"s", "hello world", `{"value":"hello world","type":"STRING"}`},
		{"s", `"15"`, `{"value":"15","type":"STRING"}`},
		{"d", "2024-01-01", `{"value":"2024-01-01","type":"STRING"}`},
		{"la", "[1, 2, 3]", `{"value":[1,2,3],"type":"LONG_ARRAY"}`},
		{"da", "[1, 2.5]", `{"value":[1,2.5],"type":"DOUBLE_ARRAY"}`},
		{"sa", "[a, b]", `{"value":["a","b"],"type":"STRING_ARRAY"}`},
		{"ba", "[true, false]", `{"value":[true,false],"type":"BOOLEAN_ARRAY"}`},
		{"ea", "[]", `{"value":[],"type":"STRING_ARRAY"}`},
		{"sm", "{a: x, b: y}", `{"value":{"a":"x","b":"y"},"type":"STRING_MAP"}`},
		{"m", "{a: 1, '!b': 'x + 1'}", `{"value":{"a":{"value":1,"type":"LONG"},"b":{"expression":"x + 1","type":"STRING"}},"type":"MAP"}`},
		{"em", "{}", `{"value":{},"type":"MAP"}`},
		{"'!e'", "1 + 2", `{"expression":"1 + 2","type":"STRING"}`},
		{"'!e<long>'", "1 + 2", `{"expression":"1 + 2","type":"LONG"}`},
		{"'!arr'", "return new String[]{'a'};", `{"expression":"return new String[]{'a'};","type":"STRING_ARRAY"}`},
		{"'x<double>'", "3", `{"value":3,"type":"DOUBLE"}`},
		{"'x<array<double>>'", "[1, 2]", `{"value":[1,2],"type":"DOUBLE_ARRAY"}`},
		{"'x<pmap>'", "{a: b}", `{"value":{"a":{"value":"b","type":"STRING"}},"type":"MAP"}`},
		{"'x<map>(immutable)'", "{a: b}", `{"value":{"a":"b"},"type":"STRING_MAP","mode":"IMMUTABLE"}`},
		{"'x (mutable_on_start)'", "1", `{"value":1,"type":"LONG","mode":"MUTABLE_ON_START"}`},
		{"r", "${missing@nowhere}", `{"expression":"params.getFromStep('nowhere', 'missing')","type":"STRING"}`},
		{"q", "it's ${a@b}", `{"expression":"'it\\'s ' + params.getFromStep('b', 'a')","type":"STRING"}`},
		{"plain", "$foo and ${bar}", `{"value":"$foo and ${bar}","type":"STRING"}`},
	}
	for _, tc := range tests {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			y := "Workflow:\n  id: w\n  " + tc.key + ": " + tc.value + "\n  jobs:\n    - job: {id: a, type: NoOp}\n"
			d, err := DecodeYAML([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Workflow.Params) != 1 {
				t.Fatalf("params = %v", d.Workflow.Params)
			}
			for _, p := range d.Workflow.Params {
				got, _ := marshalNoEscape(p)
				if string(got) != tc.want {
					t.Fatalf("param = %s, want %s", got, tc.want)
				}
			}
		})
	}
}

func TestYAMLJobOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		jobs string
		want string // successors per job, "a>b" edges joined by spaces
	}{
		{"sequential by default", "- job: {id: a, type: NoOp}\n    - job: {id: b, type: NoOp}\n    - job: {id: c, type: NoOp}", "a>b b>c"},
		{"explicit transitions switch the chain off", "- job: {id: a, type: NoOp, transition: [c]}\n    - job: {id: b, type: NoOp}\n    - job: {id: c, type: NoOp}", "a>c"},
		{"dag parallel", "- job: {id: a, type: NoOp}\n    - job: {id: b, type: NoOp}\n  dag: parallel", ""},
		{"dag sequential keeps explicit ones", "- job: {id: a, type: NoOp, transition: [c]}\n    - job: {id: b, type: NoOp}\n    - job: {id: c, type: NoOp}\n  dag: sequential", "a>c b>c"},
		{"dag map", "- job: {id: a, type: NoOp}\n    - job: {id: b, type: NoOp}\n  dag: {b: [a]}", "b>a"},
		{"single transition string", "- job: {id: a, type: NoOp, transition: b}\n    - job: {id: b, type: NoOp}", "a>b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := DecodeYAML([]byte("Workflow:\n  id: w\n  jobs:\n    " + tc.jobs + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			var edges []string
			for _, n := range d.Workflow.Steps {
				for _, to := range sortedKeys(n.Common().Successors()) {
					edges = append(edges, n.ID()+">"+to)
				}
			}
			if got := strings.Join(edges, " "); got != tc.want {
				t.Fatalf("edges = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestYAMLErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		doc   string
		wants []want
	}{
		{"malformed", "Workflow:\n  id: [a\n", []want{{"", "malformed YAML: line 1: did not find expected ',' or ']'"}}},
		{"empty", "", []want{{"", "malformed YAML: empty document"}}},
		{"two documents", "Workflow: {id: a}\n---\nWorkflow: {id: b}\n", []want{{"", "only one document"}}},
		{"no workflow key", "workflow_def:\n  id: a\n", []want{{"workflow_def", "unknown field"}, {"", "the Workflow key is missing"}}},
		{"no jobs", "Workflow:\n  id: a\n", []want{{"Workflow.jobs", "at least one job is required"}}},
		{"job entry shape", "Workflow:\n  id: a\n  jobs:\n    - job:\n      id: x\n    - task: {id: y}\n    - job: [1]\n",
			[]want{
				{"Workflow.jobs[0]", "a job entry must have exactly one key: job, foreach, while or subworkflow; got job, id (line 4, column 7)"},
				{"Workflow.jobs[1].task", `unknown job kind "task"`},
				{"Workflow.jobs[2].job", "expected an object, got array (line 7, column 12)"},
			}},
		{"bad transitions", "Workflow:\n  id: a\n  jobs:\n    - job:\n        id: x\n        type: NoOp\n        transition: ['OTHERWISE y', 'IF x THEN', 'WHEN y']\n    - job: {id: y, type: NoOp}\n",
			[]want{
				{"Workflow.jobs[0].job.transition[0]", "OTHERWISE must be the last transition (line 7, column 22)"},
				{"Workflow.jobs[0].job.transition[1]", `invalid transition "IF x THEN"`},
				{"Workflow.jobs[0].job.transition[2]", `invalid transition "WHEN y"`},
			}},
		{"bad dag", "Workflow:\n  id: a\n  jobs:\n    - job: {id: x, type: NoOp}\n  dag: random\n", []want{{"Workflow.dag", `unknown dag order "random"`}}},
		{"dag unknown job", "Workflow:\n  id: a\n  jobs:\n    - job: {id: x, type: NoOp}\n  dag: {y: [x]}\n", []want{{"Workflow.dag.y", `dag refers to unknown job "y"`}}},
		{"param syntax", "Workflow:\n  id: a\n  'x<int>': 1\n  'y(frozen)': 1\n  '!': 1\n  z: ~\n  m: [1, a]\n  'l<long>': 1.5\n  jobs:\n    - job: {id: x, type: NoOp}\n",
			[]want{
				{`Workflow["x<int>"]`, `unknown parameter type "int"`},
				{`Workflow["y(frozen)"]`, `unknown parameter mode "FROZEN"`},
				{`Workflow["!"]`, "parameter name is empty"},
				{"Workflow.z", `parameter "z" has no value`},
				{"Workflow.m", "cannot infer the type of a list"},
				{`Workflow["l<long>"]`, `expected an integer for LONG, got number "1.5"`},
			}},
		{"duplicate params", "Workflow:\n  id: a\n  x: 1\n  '!x': '2'\n  jobs:\n    - job: {id: x, type: NoOp}\n", []want{{`Workflow["!x"]`, `parameter "x" is defined twice (line 4, column 9)`}}},
		{"duplicate keys", "Workflow:\n  id: a\n  id: b\n  jobs:\n    - job: {id: x, type: NoOp}\n", []want{{"Workflow.id", "duplicate field (line 3, column 3)"}}},
		{"embedded blocks are strict", "Workflow:\n  id: a\n  jobs:\n    - job:\n        id: x\n        type: NoOp\n        retry_policy: {error_retries: 1}\n",
			[]want{{"Workflow.jobs[0].job.retry_policy.error_retries", "unknown field (line 7, column 39)"}}},
		{"range needs to", "Workflow:\n  id: a\n  jobs:\n    - foreach:\n        id: f\n        ranges: {h: {from: 1}}\n        jobs: [{job: {id: x, type: NoOp}}]\n",
			[]want{{"Workflow.jobs[0].foreach.ranges.h.to", "to is required"}}},
		{"ref typed as non-string", "Workflow:\n  id: a\n  'x<long>': 'n=${a@b}'\n  jobs:\n    - job: {id: x, type: NoOp}\n", []want{{`Workflow["x<long>"]`, "a string with step references is a STRING, not LONG"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := DecodeYAML([]byte(tc.doc))
			if d != nil {
				t.Error("got a definition along with the error")
			}
			assertProblems(t, err, tc.wants...)
		})
	}
}

func TestYAMLValidationUsesModelPaths(t *testing.T) {
	t.Parallel()
	y := "Workflow:\n  id: a\n  jobs:\n    - job: {id: x, type: NoOp, transition: [missing]}\n"
	d, err := DecodeYAML([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	assertProblems(t, Validator{}.Validate(d), want{"workflow.steps[0].step.transition.successors.missing", "not a step of this steps list"})
}

func TestYAMLAndJSONAgree(t *testing.T) {
	t.Parallel()
	y := `Workflow:
  id: same
  owner: tester
  run_strategy: sequential
  threshold: 15
  jobs:
    - job:
        id: job.1
        type: NoOp
        transition: [job.2]
    - job:
        id: job.2
        type: NoOp
        p: {a: b}
`
	j := `{"properties":{"owner":"tester","run_strategy":"sequential"},"workflow":{"id":"same",
		"params":{"threshold":{"value":15,"type":"LONG"}},
		"steps":[{"step":{"id":"job.1","type":"NoOp","transition":{"successors":{"job.2":"true"}}}},
		         {"step":{"id":"job.2","type":"NoOp","params":{"p":{"value":{"a":"b"},"type":"STRING_MAP"}}}}]}}`
	dy, err := DecodeYAML([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	dj := mustDecode(t, j)
	by, _ := json.Marshal(dy)
	bj, _ := json.Marshal(dj)
	if string(by) != string(bj) {
		t.Fatalf("YAML and JSON differ:\n%s\n%s", by, bj)
	}
}

func TestYAMLAliasesAndMergeKeys(t *testing.T) {
	t.Parallel()
	y := `base: &base {type: NoOp, failure_mode: IGNORE_FAILURE}
Workflow:
  id: a
  jobs:
    - job: {<<: *base, id: x}
    - job: {<<: *base, id: y, failure_mode: FAIL_IMMEDIATELY}
`
	_, err := DecodeYAML([]byte(y))
	assertProblems(t, err, want{"base", "unknown field"})
	y = strings.Replace(y, "base: &base {type: NoOp, failure_mode: IGNORE_FAILURE}\nWorkflow:\n  id: a\n",
		"Workflow:\n  id: a\n  tmpl: &base {type: NoOp, failure_mode: IGNORE_FAILURE}\n", 1)
	_, err = DecodeYAML([]byte(y))
	assertProblems(t, err) // tmpl is a workflow param (STRING_MAP)
	d, _ := DecodeYAML([]byte(y))
	if d.Workflow.Steps[0].Common().FailureMode != FailureModeIgnoreFailure || d.Workflow.Steps[1].Common().FailureMode != FailureModeFailImmediately {
		t.Fatalf("merge keys: %+v %+v", d.Workflow.Steps[0].Common(), d.Workflow.Steps[1].Common())
	}
}
