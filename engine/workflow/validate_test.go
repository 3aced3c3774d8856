package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// doc builds a definition from workflow fields (without braces) and a steps array body.
func doc(fields, steps string) string {
	if fields != "" {
		fields += ","
	}
	return `{"workflow":{"id":"wf",` + fields + `"steps":[` + steps + `]}}`
}

const noop = `{"step":{"id":"a","type":"NoOp"}}`

func TestValidateProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		doc   string
		wants []want
	}{
		// ids
		{"workflow id required", `{"workflow":{"steps":[` + noop + `]}}`, []want{{"workflow.id", "workflow id is required"}}},
		{"workflow id charset", `{"workflow":{"id":"bad id!","steps":[` + noop + `]}}`, []want{{"workflow.id", `id "bad id!" may contain only letters, digits`}}},
		{"workflow id leading dot", `{"workflow":{"id":".wf","steps":[` + noop + `]}}`, []want{{"workflow.id", "must not start with '.' or '-'"}}},
		{"workflow id too long", `{"workflow":{"id":"` + strings.Repeat("w", 129) + `","steps":[` + noop + `]}}`, []want{{"workflow.id", "129 characters long, more than the limit of 128"}}},
		{"workflow id reserved prefix", `{"workflow":{"id":"Maestro_x","steps":[` + noop + `]}}`, []want{{"workflow.id", `reserved prefix "maestro_"`}}},
		{"workflow id reserved suffix", `{"workflow":{"id":"x_maestro","steps":[` + noop + `]}}`, []want{{"workflow.id", `reserved suffix "_maestro"`}}},
		{"workflow id may start with a digit", `{"workflow":{"id":"1wf","steps":[` + noop + `]}}`, nil},
		{"step id required", doc("", `{"step":{"type":"NoOp"}}`), []want{{"workflow.steps[0].step.id", "step id is required"}}},
		{"step id starts with digit", doc("", `{"step":{"id":"1a","type":"NoOp"}}`), []want{{"workflow.steps[0].step.id", "must start with a letter or '_'"}}},
		{"step id double underscore", doc("", `{"step":{"id":"a__b","type":"NoOp"}}`), []want{{"workflow.steps[0].step.id", "must not contain '__'"}}},
		{"step id reserved prefix", doc("", `{"step":{"id":"maestro_a","type":"NoOp"}}`), []want{{"workflow.steps[0].step.id", "reserved prefix"}}},
		{"step id too long", doc("", `{"step":{"id":"`+strings.Repeat("s", 129)+`","type":"NoOp"}}`), []want{{"workflow.steps[0].step.id", "more than the limit of 128"}}},
		{"duplicate step ids across nesting", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"f":"true"}}}},
			{"foreach":{"id":"f","params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG_ARRAY","value":[1]}}}},
			"steps":[{"step":{"id":"a","type":"NoOp"}}]}}`),
			[]want{{"workflow.steps[1].foreach.steps[0].step.id", `duplicate step id "a", already defined at workflow.steps[0].step`}}},
		{"duplicate sibling ids", doc("", noop+","+noop), []want{{"workflow.steps[1].step.id", `duplicate step id "a"`}}},

		// steps and DAG
		{"no steps", `{"workflow":{"id":"wf","steps":[]}}`, []want{{"workflow.steps", "at least one step is required"}}},
		{"missing steps", `{"workflow":{"id":"wf"}}`, []want{{"workflow.steps", "at least one step is required"}}},
		{"successor missing", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"job9":"true"}}}}`),
			[]want{{"workflow.steps[0].step.transition.successors.job9", `successor "job9" is not a step of this steps list`}}},
		{"successor in another list", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"inner":"true"}}}},
			{"while":{"id":"w","condition":"x","steps":[{"step":{"id":"inner","type":"NoOp","transition":{"successors":{"a":"true"}}}}]}}`),
			[]want{
				{"workflow.steps[0].step.transition.successors.inner", "defined in another steps list (workflow.steps[1].while.steps[0].step)"},
				{"workflow.steps[1].while.steps[0].step.transition.successors.a", "defined in another steps list (workflow.steps[0].step)"},
			}},
		{"successor with dotted id", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"job.9":"true"}}}}`),
			[]want{{`workflow.steps[0].step.transition.successors["job.9"]`, "not a step of this steps list"}}},
		{"cycle of three", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
			{"step":{"id":"b","type":"NoOp","transition":{"successors":{"c":"true"}}}},
			{"step":{"id":"c","type":"NoOp","transition":{"successors":{"a":"true"}}}}`),
			[]want{{"workflow.steps[2].step.transition.successors.a", "cycle: a -> b -> c -> a"}}},
		{"self loop", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"a":"true"}}}}`),
			[]want{{"workflow.steps[0].step.transition.successors.a", "cycle: a -> a"}}},
		{"two separate cycles and a tail", doc("", `{"step":{"id":"s","type":"NoOp","transition":{"successors":{"a":"true"}}}},
			{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
			{"step":{"id":"b","type":"NoOp","transition":{"successors":{"a":"true","t":"true"}}}},
			{"step":{"id":"t","type":"NoOp","transition":{"successors":{"x":"true"}}}},
			{"step":{"id":"x","type":"NoOp","transition":{"successors":{"y":"true"}}}},
			{"step":{"id":"y","type":"NoOp","transition":{"successors":{"x":"true"}}}}`),
			[]want{
				{"workflow.steps[2].step.transition.successors.a", "cycle: a -> b -> a"},
				{"workflow.steps[5].step.transition.successors.x", "cycle: x -> y -> x"},
			}},
		{"cycle inside foreach", doc("", `{"foreach":{"id":"f","params":{"loop_params":{"type":"MAP","value":{}}},"steps":[
			{"step":{"id":"p","type":"NoOp","transition":{"successors":{"q":"true"}}}},
			{"step":{"id":"q","type":"NoOp","transition":{"successors":{"p":"true"}}}}]}}`),
			[]want{{"workflow.steps[0].foreach.steps[1].step.transition.successors.p", "cycle: p -> q -> p"}}},
		{"predecessors mismatch", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"true"}}}},
			{"step":{"id":"b","type":"NoOp","transition":{"predecessors":["c"]}}},{"step":{"id":"c","type":"NoOp"}}`),
			[]want{{"workflow.steps[1].step.transition.predecessors", "predecessors [c] do not match the DAG, which gives [a]"}}},
		{"empty condition", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":" "}}}},{"step":{"id":"b","type":"NoOp"}}`),
			[]want{{"workflow.steps[0].step.transition.successors.b", "condition must not be empty"}}},
		{"bad condition through the hook", doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"x @@ y"}}}},{"step":{"id":"b","type":"NoOp"}}`),
			[]want{{"workflow.steps[0].step.transition.successors.b", "invalid SEL expression: unexpected '@@'"}}},

		// step types and fields
		{"step type required", doc("", `{"step":{"id":"a"}}`), []want{{"workflow.steps[0].step.type", "step type is required"}}},
		{"unsupported step type", doc("", `{"step":{"id":"a","type":"Spark"}}`), []want{{"workflow.steps[0].step.type", `unsupported step type "Spark"; supported: NoOp, Sleep`}}},
		{"unknown typed-step field", doc("", `{"step":{"id":"a","type":"NoOp","sleep_seconds":3}}`), []want{{"workflow.steps[0].step.sleep_seconds", `unknown field for step type "NoOp"`}}},
		{"bad sleep_seconds", doc("", `{"step":{"id":"a","type":"Sleep","sleep_seconds":"soon"}}`), []want{{"workflow.steps[0].step.sleep_seconds", `invalid duration "soon"`}}},
		{"fractional and templated sleep_seconds", doc("", `{"step":{"id":"a","type":"Sleep","sleep_seconds":0.5}},{"step":{"id":"b","type":"Sleep","sleep_seconds":"${s}"}}`), nil},
		{"negative sleep_seconds", doc("", `{"step":{"id":"a","type":"Sleep","sleep_seconds":-1}}`), []want{{"workflow.steps[0].step.sleep_seconds", "must be between 0 and 10368000 seconds (120 days), got -1"}}},
		// Bounds on every number and duration (issue 27 N5): 1e18 seconds
		// overflowed into a sleep that ended at once.
		{"huge sleep_seconds", doc("", `{"step":{"id":"a","type":"Sleep","sleep_seconds":1e18}},{"step":{"id":"b","type":"Sleep","sleep_seconds":"121d"}}`),
			[]want{{"workflow.steps[0].step.sleep_seconds", "must be between 0 and 10368000 seconds (120 days), got 1e+18"},
				{"workflow.steps[1].step.sleep_seconds", "must be between 0 and 10368000 seconds (120 days), got 1.04544e+07"}}},
		{"timeout seconds that would wrap", doc(`"timeout":9223372036854775807`, noop), []want{{"workflow.timeout", "9223372036854775807 seconds is out of range"}}},
		{"alert durations and times", `{"properties":{"alerting":{"tct":{"completed_by_ts":253402300800000},
			"type_configs":{"LONG_RUNNING":{"duration_minutes":9223372036854775807}}}},"workflow":{"id":"wf","steps":[` + noop + `]}}`,
			[]want{{"properties.alerting.tct.completed_by_ts", "must be epoch milliseconds from 1 to 253402300799999, got 253402300800000"},
				{"properties.alerting.type_configs.LONG_RUNNING.duration_minutes", "must be between 1 and 172800, got 9223372036854775807"}}},
		{"tag permit", doc(`"tags":[{"name":"gpu","permit":3000000000}]`, noop), []want{{"workflow.tags[0].permit", "must be between 0 and 2147483647, got 3000000000"}}},
		{"git timestamp", `{"git_info":{"timestamp":-5},"workflow":{"id":"wf","steps":[` + noop + `]}}`, []want{{"git_info.timestamp", "must be between 0 and 253402300799999, got -5"}}},
		{"interval too long", doc(`"time_triggers":[{"type":"INTERVAL","interval":"4000d"}]`, noop), []want{{"workflow.time_triggers[0].interval", `must be at most 3660 days, got "4000d"`}}},
		{"failure mode", doc("", `{"step":{"id":"a","type":"NoOp","failure_mode":"RETRY"}}`), []want{{"workflow.steps[0].step.failure_mode", `unknown failure mode "RETRY"`}}},
		{"name and description length", doc(`"name":"`+strings.Repeat("n", 257)+`"`, `{"step":{"id":"a","type":"NoOp","description":"`+strings.Repeat("d", 16385)+`"}}`),
			[]want{{"workflow.name", "257 characters long, more than the limit of 256"}, {"workflow.steps[0].step.description", "more than the limit of 16384"}}},
		{"criticality", doc(`"criticality":"URGENT"`, noop), []want{{"workflow.criticality", `unknown criticality "URGENT"`}}},
		{"instance step concurrency", doc(`"instance_step_concurrency":1000`, noop), []want{{"workflow.instance_step_concurrency", "must be between 1 and 999, got 1000"}}},

		// timeouts
		{"timeout zero", doc(`"timeout":0`, noop), []want{{"workflow.timeout", "must be positive and at most 120 days, got 0 seconds"}}},
		{"timeout too long", doc(`"timeout":"121d"`, noop), []want{{"workflow.timeout", `must be positive and at most 120 days, got "121d"`}}},
		{"timeout garbage", doc("", `{"step":{"id":"a","type":"NoOp","timeout":"forever"}}`), []want{{"workflow.steps[0].step.timeout", `invalid duration "forever"`}}},
		{"timeout param reference is accepted", doc(`"timeout":"${t}s"`, noop), nil},

		// retry policy
		{"retry limits", doc("", `{"step":{"id":"a","type":"NoOp","retry_policy":{"error_retry_limit":100,"platform_retry_limit":-1,"timeout_retry_limit":"x"}}}`),
			[]want{
				{"workflow.steps[0].step.retry_policy.error_retry_limit", "must be between 0 and 99, got 100"},
				{"workflow.steps[0].step.retry_policy.platform_retry_limit", "must be between 0 and 99, got -1"},
				{"workflow.steps[0].step.retry_policy.timeout_retry_limit", "must be an integer or a parameter reference"},
			}},
		{"retry limit param reference", doc("", `{"step":{"id":"a","type":"NoOp","retry_policy":{"error_retry_limit":"${n}","platform_retry_limit":"3"}}}`), nil},
		{"backoff type", doc("", `{"step":{"id":"a","type":"NoOp","retry_policy":{"backoff":{"error_retry_backoff_in_secs":1}}}},
			{"step":{"id":"b","type":"NoOp","retry_policy":{"backoff":{"type":"LINEAR"}}}}`),
			[]want{
				{"workflow.steps[0].step.retry_policy.backoff.type", "backoff type is required"},
				{"workflow.steps[1].step.retry_policy.backoff.type", `unknown backoff type "LINEAR"`},
			}},
		{"backoff ranges and fixed fields", doc("", `{"step":{"id":"a","type":"NoOp","retry_policy":{"backoff":{"type":"FIXED_BACKOFF","error_retry_backoff_in_secs":86401,"error_retry_exponent":2}}}},
			{"step":{"id":"b","type":"NoOp","retry_policy":{"backoff":{"type":"EXPONENTIAL_BACKOFF","platform_retry_limit_in_secs":90000,"timeout_retry_exponent":-2}}}}`),
			[]want{
				{"workflow.steps[0].step.retry_policy.backoff.error_retry_backoff_in_secs", "must be between 0 and 86400, got 86401"},
				{"workflow.steps[0].step.retry_policy.backoff.error_retry_exponent", "not allowed for FIXED_BACKOFF"},
				{"workflow.steps[1].step.retry_policy.backoff.platform_retry_limit_in_secs", "must be between 0 and 86400, got 90000"},
				{"workflow.steps[1].step.retry_policy.backoff.timeout_retry_exponent", "must be between 0 and 2147483647, got -2"},
			}},

		// params
		{"param type required and unknown", doc(`"params":{"a":{"value":1},"b":{"type":"INT","value":1}}`, noop),
			[]want{{"workflow.params.a.type", "parameter type is required"}, {"workflow.params.b.type", `unknown parameter type "INT"`}}},
		{"param value and expression", doc(`"params":{"a":{"type":"LONG","value":1,"expression":"1"},"b":{"type":"LONG"}}`, noop),
			[]want{{"workflow.params.a", "exactly one of value or expression must be set, got both"}, {"workflow.params.b", "got neither"}}},
		{"param null value counts as unset", doc(`"params":{"a":{"type":"LONG","value":null}}`, noop), []want{{"workflow.params.a", "got neither"}}},
		{"DOUBLE written as a string, as Maestro keeps a BigDecimal's digits", doc(`"params":{"d":{"type":"DOUBLE","value":"10.229999999999"},
			"da":{"type":"DOUBLE_ARRAY","value":["1.5",2]}}`, noop), nil},
		{"param mode", doc(`"params":{"a":{"type":"LONG","value":1,"mode":"FROZEN"}}`, noop), []want{{"workflow.params.a.mode", `unknown parameter mode "FROZEN"`}}},
		{"param scalar types", doc(`"params":{"s":{"type":"STRING","value":1},"l":{"type":"LONG","value":"15"},"f":{"type":"LONG","value":1.5},
			"d":{"type":"DOUBLE","value":"x"},"b":{"type":"BOOLEAN","value":"true"}}`, noop),
			[]want{
				{"workflow.params.s.value", "expected a string for STRING, got number 1"},
				{"workflow.params.l.value", `expected an integer for LONG, got string "15"`},
				{"workflow.params.f.value", "expected an integer for LONG, got number 1.5"},
				{"workflow.params.d.value", `expected a number for DOUBLE, got string "x"`},
				{"workflow.params.b.value", `expected a boolean for BOOLEAN, got string "true"`},
			}},
		{"param collection types", doc(`"params":{"sm":{"type":"STRING_MAP","value":{"k":1,"ok":"v"}},"sa":{"type":"STRING_ARRAY","value":["a",2]},
			"la":{"type":"LONG_ARRAY","value":[1,2.5]},"da":{"type":"DOUBLE_ARRAY","value":"1,2"},"ba":{"type":"BOOLEAN_ARRAY","value":[true,null]},
			"m":{"type":"MAP","value":[1]}}`, noop),
			[]want{
				{"workflow.params.sm.value.k", "expected a string value for STRING_MAP, got number 1"},
				{"workflow.params.sa.value[1]", "expected a string for STRING_ARRAY, got number 2"},
				{"workflow.params.la.value[1]", "expected an integer for LONG_ARRAY, got number 2.5"},
				{"workflow.params.da.value", "expected an array for DOUBLE_ARRAY, got string"},
				{"workflow.params.ba.value[1]", "expected a boolean for BOOLEAN_ARRAY, got null"},
				{"workflow.params.m.value", "expected an object of parameter definitions for MAP, got array"},
			}},
		{"nested map params", doc(`"params":{"m":{"type":"MAP","value":{"x":{"type":"LONG","value":"a"},"bad name":{"type":"LONG","value":1}}}}`, noop),
			[]want{
				{"workflow.params.m.value.x.value", `expected an integer for LONG, got string "a"`},
				{`workflow.params.m.value["bad name"]`, "must start with a letter or '_'"},
			}},
		{"param names", doc(`"params":{"params":{"type":"LONG","value":1},"a__b":{"type":"LONG","value":1},"maestro_x":{"type":"LONG","value":1}}`, noop),
			[]want{
				{"workflow.params.params", `parameter name "params" is reserved`},
				{"workflow.params.a__b", "must not contain '__'"},
				{"workflow.params.maestro_x", "reserved prefix"},
			}},
		{"param expression empty and invalid", doc(`"params":{"e":{"type":"LONG","expression":""},"f":{"type":"LONG","expression":"1 @@ 2"}}`, noop),
			[]want{{"workflow.params.e.expression", "expression must not be empty"}, {"workflow.params.f.expression", "invalid SEL expression"}}},
		{"step param problems", doc("", `{"step":{"id":"a","type":"NoOp","params":{"p":{"type":"LONG","value":true}}}}`),
			[]want{{"workflow.steps[0].step.params.p.value", "expected an integer for LONG, got boolean true"}}},

		// tags
		{"tags", doc(`"tags":["a","a",{"name":" "},{"name":"n","namespace":"TEAM"}]`, noop),
			[]want{
				{"workflow.tags[1].name", `duplicate tag name "a"`},
				{"workflow.tags[2].name", "tag name is required"},
				{"workflow.tags[3].namespace", `unknown tag namespace "TEAM"`},
			}},

		// foreach, while, subworkflow
		{"foreach needs loop_params", doc("", `{"foreach":{"id":"f","steps":[`+noop+`]}}`),
			[]want{{"workflow.steps[0].foreach.params", "the loop_params parameter is required for a foreach step"}}},
		{"foreach loop params shape", doc("", `{"foreach":{"id":"f","concurrency":501,"params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG","value":1}}}},"steps":[`+noop+`]}},
			{"foreach":{"id":"g","params":{"loop_params":{"type":"STRING_MAP","value":{}}},"steps":[{"step":{"id":"b","type":"NoOp"}}]}}`),
			[]want{
				{"workflow.steps[0].foreach.concurrency", "must be between 1 and 500, got 501"},
				{"workflow.steps[0].foreach.params.loop_params.value.i.type", "a foreach loop parameter must have an array type, got LONG"},
				{"workflow.steps[1].foreach.params.loop_params.type", `must be MAP, got "STRING_MAP"`},
			}},
		{"foreach without steps", doc("", `{"foreach":{"id":"f","params":{"loop_params":{"type":"MAP","value":{}}},"steps":[]}}`),
			[]want{{"workflow.steps[0].foreach.steps", "at least one step is required"}}},
		{"nested loop param names", doc("", `{"foreach":{"id":"f","params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG_ARRAY","value":[1]}}}},"steps":[
			{"while":{"id":"w","condition":"i < 3","params":{"loop_params":{"type":"MAP","value":{"i":{"type":"LONG","value":0}}}},"steps":[`+noop+`]}}]}}`),
			[]want{{"workflow.steps[0].foreach.steps[0].while.params.loop_params.value.i", `loop parameter "i" is already defined by an enclosing loop`}}},
		{"while condition", doc("", `{"while":{"id":"w","steps":[`+noop+`]}},{"while":{"id":"v","condition":"@@","steps":[{"step":{"id":"b","type":"NoOp"}}]}}`),
			[]want{{"workflow.steps[0].while.condition", "condition must not be empty"}, {"workflow.steps[1].while.condition", "invalid SEL expression"}}},
		{"subworkflow params", doc("", `{"subworkflow":{"id":"s"}},{"subworkflow":{"id":"t","params":{"subworkflow_id":{"type":"LONG","value":1},"subworkflow_version":{"type":"LONG","value":2}}}}`),
			[]want{
				{"workflow.steps[0].subworkflow.params", "the subworkflow_id parameter is required"},
				{"workflow.steps[1].subworkflow.params.subworkflow_id.type", `must be STRING, got "LONG"`},
				{"workflow.steps[1].subworkflow.params.subworkflow_version.type", `must be STRING, got "LONG"`},
			}},

		// triggers
		{"time triggers", doc(`"time_triggers":[{"cron":"61 * * * *"},{"type":"CRON","cron":"* * * * * *","timezone":"Mars/Olympus"},
			{"type":"PREDEFINED","expression":"@fortnightly","cron":"0 * * * *"},{"type":"INTERVAL","interval":"10s"},{"timezone":"UTC"},
			{"type":"LUNAR"},{"cron":"0 0 * * *","fuzzy_max_delay":0}]`, noop),
			[]want{
				{"workflow.time_triggers[0].cron", `invalid cron expression "61 * * * *"`},
				{"workflow.time_triggers[1].cron", "fires more often than once a minute"},
				{"workflow.time_triggers[1].timezone", `unknown time zone "Mars/Olympus"`},
				{"workflow.time_triggers[2].expression", `unknown schedule "@fortnightly"`},
				{"workflow.time_triggers[2].cron", "not allowed for PREDEFINED triggers"},
				{"workflow.time_triggers[3].interval", "must be at least one minute"},
				{"workflow.time_triggers[4].type", "trigger type is required"},
				{"workflow.time_triggers[5].type", `unknown trigger type "LUNAR"`},
				{"workflow.time_triggers[6].fuzzy_max_delay", "must be positive"},
			}},
		{"quartz forms refused with the cron field named", doc(`"time_triggers":[{"cron":"0 0 12 * * ?"},{"cron":"0 0 12 ? * 6#6","timezone":"UTC"},
			{"cron":"0 0 12 * * ? 1969"},{"cron":"0 30 * * *","fuzzy_max_delay":60},{"cron":"0 0 12 ? * ?"},{"cron":"0 0 12 L,3 * ?"},
			{"cron":"*/30 * * * * ?"},{"cron":"0 0 * * *","fuzzy_max_delay":"${d}s"},{"cron":"@every 5m"}]`, noop),
			[]want{
				{"workflow.time_triggers[1].cron", `invalid cron expression "0 0 12 ? * 6#6": day-of-week field "6#6": the occurrence after '#' must be 1 to 5`},
				{"workflow.time_triggers[2].cron", `year field "1969"`},
				{"workflow.time_triggers[3].cron", `hour field "30"`},
				{"workflow.time_triggers[4].cron", "cannot both be '?'"},
				{"workflow.time_triggers[5].cron", `day-of-month field "L,3"`},
				{"workflow.time_triggers[6].cron", "fires more often than once a minute"},
				{"workflow.time_triggers[7].fuzzy_max_delay", "cannot refer to params"},
				{"workflow.time_triggers[8].cron", "use an INTERVAL trigger for @every"},
			}},
		{"signal triggers", doc(`"signal_triggers":[{"definitions":{}},{"definitions":{
			"a":{"match_params":{"k":{"value":1.5,"operator":"=="},"j":{"operator":"="}},"join_keys":["j","j"]},
			"b":{"join_keys":[]}},"condition":"@@","dedup_expr":" ","params":{"p":{"type":"LONG"}}}]`, noop),
			[]want{
				{"workflow.signal_triggers[0].definitions", "at least one signal definition is required"},
				{"workflow.signal_triggers[1].definitions.a.match_params.k.value", "expected a string or an integer, got number 1.5"},
				{"workflow.signal_triggers[1].definitions.a.match_params.k.operator", `unknown operator "=="`},
				{"workflow.signal_triggers[1].definitions.a.match_params.j.value", "value is required"},
				{"workflow.signal_triggers[1].definitions.a.join_keys[0]", `join key "j" cannot also be in match_params`},
				{"workflow.signal_triggers[1].definitions.a.join_keys[1]", `duplicate join key "j"`},
				{"workflow.signal_triggers[1].definitions.a.join_keys[1]", `join key "j" cannot also be in match_params`},
				{"workflow.signal_triggers[1].definitions.b.join_keys", "must have the same length"},
				{"workflow.signal_triggers[1].condition", "invalid SEL expression"},
				{"workflow.signal_triggers[1].dedup_expr", "dedup_expr must not be empty"},
				{"workflow.signal_triggers[1].params.p", "got neither"},
			}},
		{"incremental signal triggers", doc(`"signal_triggers":[{"incremental":true,"definitions":{"sales.orders":{},"sales.items":{}}},
			{"incremental":true,"definitions":{"sales.orders":{"join_keys":["k"]}},"dedup_expr":"1","params":{"p":{"type":"LONG","value":1}}},
			{"incremental":true,"definitions":{"sales.orders":{"match_params":{"operation":{"value":"append","operator":"="}}}}}]`, noop),
			[]want{
				{"workflow.signal_triggers[0].definitions", "an incremental trigger needs exactly one signal definition (the table change), got 2"},
				{`workflow.signal_triggers[1].definitions["sales.orders"].join_keys`, "an incremental trigger has no join_keys"},
				{"workflow.signal_triggers[1].dedup_expr", "an incremental trigger has no dedup_expr"},
				{"workflow.signal_triggers[1].params", "an incremental trigger has no params"},
			}},
		{"repeated signal trigger", doc(`"signal_triggers":[{"definitions":{"a":{}}},{"definitions":{"b":{}}},{"definitions":{"a":{}}}]`, noop),
			[]want{{"workflow.signal_triggers[2]", "repeats signal_triggers[0]"}}},
		{"signal dependencies and outputs", doc("", `{"step":{"id":"a","type":"NoOp",
			"signal_dependencies":[{"name":"","match_params":{"k":{"param":{"type":"DOUBLE","value":1.5}}}}],
			"signal_outputs":[{"name":"out","params":{"name":{"type":"STRING","value":"x"},"b":{"type":"BOOLEAN","value":true}},"payload":{"b":{"type":"LONG","value":1}}}]}}`),
			[]want{
				{"workflow.steps[0].step.signal_dependencies[0].name", "signal name is required"},
				{"workflow.steps[0].step.signal_dependencies[0].match_params.k.param.type", "must be STRING or LONG, got DOUBLE"},
				{"workflow.steps[0].step.signal_dependencies[0].match_params.k.operator", "operator is required"},
				{"workflow.steps[0].step.signal_outputs[0].params.name", `cannot be called "name"`},
				{"workflow.steps[0].step.signal_outputs[0].params.b.type", "must be STRING or LONG, got BOOLEAN"},
				{"workflow.steps[0].step.signal_outputs[0].payload.b", `payload key "b" repeats a key of params`},
			}},

		// properties
		{"run strategy rules", `{"properties":{"run_strategy":"RANDOM","step_concurrency":0,"owner":"","alerting":[1]},"workflow":{"id":"wf","steps":[` + noop + `]}}`,
			[]want{
				{"properties.run_strategy", `unknown run strategy "RANDOM"`},
				{"properties.step_concurrency", "must be between 1 and 1000, got 0"},
				{"properties.owner", "owner name is required"},
				{"properties.alerting", "expected an object"},
			}},
		{"run strategy concurrency", `{"properties":{"run_strategy":{"rule":"SEQUENTIAL","workflow_concurrency":5}},"workflow":{"id":"wf","steps":[` + noop + `]}}`,
			[]want{{"properties.run_strategy.workflow_concurrency", "only PARALLEL allows a workflow concurrency greater than 1"}}},
		{"run strategy number too big", `{"properties":{"run_strategy":1001},"workflow":{"id":"wf","steps":[` + noop + `]}}`,
			[]want{{"properties.run_strategy", "workflow concurrency must be between 0 and 1000, got 1001"}}},
		{"run strategy rule missing", `{"properties":{"run_strategy":{"workflow_concurrency":1}},"workflow":{"id":"wf","steps":[` + noop + `]}}`,
			[]want{{"properties.run_strategy.rule", "run strategy rule is required"}}},
		{"run retention days", `{"properties":{"run_retention_days":0},"workflow":{"id":"wf","steps":[` + noop + `]}}`,
			[]want{{"properties.run_retention_days", "must be between 1 and 36500 days, got 0"}}},
		{"run retention days set", `{"properties":{"run_retention_days":30},"workflow":{"id":"wf","steps":[` + noop + `]}}`, nil},
		{"paused parallel is fine", `{"properties":{"run_strategy":{"rule":"PARALLEL","workflow_concurrency":0}},"workflow":{"id":"wf","steps":[` + noop + `]}}`, nil},
		{"alerting as Maestro's", `{"properties":{"alerting":{"emails":["a@example.com"],"slack":{"channels":["c"]},
			"tct":{"completed_by_hour":1,"tz":"UTC"},"bypass_digest_config":{"workflow":true,"steps":["s"]},
			"pagerduty_config":{"always_page":true,"severity":"warning"},"custom_field":{"kept":true},
			"type_configs":{"STEP_FAILURE":{"actions":["email","page","slack"]},"LONG_RUNNING":{"disabled":true,"granularity":"ALL"},
			"BREAKPOINT_HIT":{"granularity":"step"},"SUCCESS_WITHIN":{"duration_minutes":1440}}}},"workflow":{"id":"wf","steps":[` + noop + `]}}`, nil},
		{"alerting mistakes", `{"properties":{"alerting":{"tct":{"completed_by_hour":72,"duration_minutes":5,"tz":"Mars/Olympus"},
			"pagerduty_config":{"severity":"sev0"},
			"type_configs":{"STEP_FAIL":{},"LONG_RUNNING":{"actions":["email","shout"],"granularity":"run","duration_minutes":0},
			"DEPENDENCY_LATE":{}}}},"workflow":{"id":"wf","steps":[` + noop + `]}}`,
			[]want{
				{"properties.alerting.tct", "one and only one of completed_by_hour, duration_minutes and completed_by_ts has to be set"},
				{"properties.alerting.tct.completed_by_hour", "must be between 1 and 48, got 72"},
				{"properties.alerting.tct.tz", `unknown time zone "Mars/Olympus"`},
				{"properties.alerting.pagerduty_config.severity", `unknown severity "sev0"`},
				{"properties.alerting.type_configs.STEP_FAIL", `unknown alert type "STEP_FAIL"`},
				{"properties.alerting.type_configs.LONG_RUNNING.actions[1]", `unknown action "shout"`},
				{"properties.alerting.type_configs.LONG_RUNNING.granularity", `unknown granularity "run"`},
				{"properties.alerting.type_configs.LONG_RUNNING.duration_minutes", "must be between 1 and 172800, got 0"},
				{"properties.alerting.type_configs.DEPENDENCY_LATE.duration_minutes", "DEPENDENCY_LATE needs duration_minutes"},
			}},
		{"alerting of the wrong shape", `{"properties":{"alerting":{"emails":"a@example.com"}},"workflow":{"id":"wf","steps":[` + noop + `]}}`,
			[]want{{"properties.alerting", "invalid alerting block: emails: expected []string, got string"}}},
	}
	v := Validator{CheckExpression: trivialCheck}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := mustDecode(t, tc.doc)
			assertProblems(t, v.Validate(d), tc.wants...)
		})
	}
}

func TestValidateReportsEverythingSorted(t *testing.T) {
	t.Parallel()
	steps := make([]string, 12)
	for i := range steps {
		steps[i] = fmt.Sprintf(`{"step":{"id":"s%d","type":"Bogus"}}`, i)
	}
	d := mustDecode(t, `{"workflow":{"id":"","steps":[`+strings.Join(steps, ",")+`]}}`)
	ps := problemsOf(t, Validator{}.Validate(d))
	if len(ps) != 13 {
		t.Fatalf("got %d problems:\n%s", len(ps), formatProblems(ps))
	}
	if ps[0].Path != "workflow.id" || ps[1].Path != "workflow.steps[0].step.type" ||
		ps[3].Path != "workflow.steps[2].step.type" || ps[12].Path != "workflow.steps[11].step.type" {
		t.Fatalf("not sorted by path:\n%s", formatProblems(ps))
	}
	err := Validator{}.Validate(d)
	if msg := err.Error(); !strings.Contains(msg, "(13 problems)") || !strings.Contains(msg, "and 8 more") {
		t.Fatalf("Error() = %s", msg)
	}
	out, _ := json.Marshal(err)
	if !strings.Contains(string(out), `{"field":"workflow.id","message":"workflow id is required"}`) {
		t.Fatalf("JSON = %s", out)
	}
}

func TestValidatorOptions(t *testing.T) {
	t.Parallel()
	chain := func(n int) string {
		s := make([]string, n)
		for i := range s {
			next := ""
			if i+1 < n {
				next = fmt.Sprintf(`,"transition":{"successors":{"s%d":"true"}}`, i+1)
			}
			s[i] = fmt.Sprintf(`{"step":{"id":"s%d","type":"NoOp"%s}}`, i, next)
		}
		return strings.Join(s, ",")
	}
	nested := func(depth int) string {
		inner := `{"step":{"id":"leaf","type":"NoOp"}}`
		for i := depth; i > 0; i-- {
			inner = fmt.Sprintf(`{"while":{"id":"w%d","condition":"true","steps":[%s]}}`, i, inner)
		}
		return inner
	}
	tests := []struct {
		name  string
		v     Validator
		doc   string
		wants []want
	}{
		{"1000 steps pass by default", Validator{}, doc("", chain(1000)), nil},
		{"1001 steps fail by default", Validator{}, doc("", chain(1001)), []want{{"workflow.steps", "1001 steps exceed the limit of 1000 steps per steps list"}}},
		{"MaxSteps", Validator{MaxSteps: 3}, doc("", chain(4)), []want{{"workflow.steps", "4 steps exceed the limit of 3"}}},
		{"depth 10 passes by default", Validator{}, doc("", nested(10)), nil},
		{"depth 11 fails by default", Validator{}, doc("", nested(11)),
			[]want{{"workflow.steps[0].while.steps[0].while.steps[0].while.steps[0].while.steps[0].while.steps[0].while.steps[0].while.steps[0].while.steps[0].while.steps[0].while.steps[0].while", "nesting depth 11 exceeds the limit of 10"}}},
		{"MaxDepth counts subworkflows", Validator{MaxDepth: 1}, doc("", `{"while":{"id":"w","condition":"true","steps":[{"subworkflow":{"id":"s","params":{"subworkflow_id":{"type":"STRING","value":"x"}}}}]}}`),
			[]want{{"workflow.steps[0].while.steps[0].subworkflow", "nesting depth 2 exceeds the limit of 1"}}},
		{"StepTypes", Validator{StepTypes: []string{"Spark"}}, doc("", `{"step":{"id":"a","type":"spark"}},{"step":{"id":"b","type":"NoOp"}}`),
			[]want{{"workflow.steps[1].step.type", `unsupported step type "NoOp"; supported: Spark`}}},
		{"StepConfig", Validator{StepConfig: map[string]map[string]ConfigCheck{"Http": {"url": func(v json.RawMessage) error {
			if !strings.HasPrefix(string(v), `"https://`) {
				return errors.New("url must use https")
			}
			return nil
		}}}}, doc("", `{"step":{"id":"a","type":"Http","url":"http://x","params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"https://x"}}}}}},{"step":{"id":"b","type":"Sleep","sleep_seconds":1}}`),
			[]want{
				{"workflow.steps[0].step.url", "url must use https"},
				{"workflow.steps[1].step.sleep_seconds", `unknown field for step type "Sleep"`},
			}},
		{"Maestro types without a runtime here", Validator{}, doc("", `{"step":{"id":"a","type":"Notebook","transition":{"successors":{"b":"true","c":"true"}}}},{"step":{"id":"b","type":"kubernetes"}},{"step":{"id":"c","type":"Titus"}}`),
			[]want{
				{"workflow.steps[0].step.params.notebook", "a Notebook step needs the notebook param, a MAP with input_path"},
				{"workflow.steps[1].step.type", `step type "Kubernetes" is a Maestro step type this deployment does not run: run the container with an EcsTask step (ECS, Fargate) or a Batch step (AWS Batch)`},
				{"workflow.steps[2].step.type", `step type "Titus" is a Maestro step type this deployment does not run`},
			}},
		{"job params of Http, Lambda and EcsTask", Validator{}, doc("", `{"step":{"id":"a","type":"Http","transition":{"successors":{"b":"true","c":"true","d":"true","e":"true","f":"true"}}}},`+
			`{"step":{"id":"b","type":"Lambda","params":{"lambda":{"type":"STRING_MAP","value":{"function_name":"f"}}}}},`+
			`{"step":{"id":"c","type":"EcsTask","params":{"ecs_task":{"type":"MAP","value":{"cluster":{"type":"STRING","value":"c"}}}}}},`+
			`{"step":{"id":"d","type":"Http","params":{"http":{"type":"MAP","expression":"return new Map();"}}}},`+
			`{"step":{"id":"e","type":"notebook","params":{"notebook":{"type":"STRING_MAP","value":{"output_path":"s3://b/o"}}}}},`+
			`{"step":{"id":"f","type":"Notebook","params":{"notebook":{"type":"STRING_MAP","value":{"input_path":"s3://b/i"}}}}}`),
			[]want{
				{"workflow.steps[4].step.params.notebook.value", "notebook.input_path is required"},
				{"workflow.steps[0].step.params.http", "a Http step needs the http param, a MAP with url"},
				{"workflow.steps[1].step.params.lambda.type", `must be MAP, got "STRING_MAP"`},
				{"workflow.steps[2].step.params.ecs_task.value", "ecs_task.task_definition is required"},
			}},
		{"no hook only checks emptiness", Validator{}, doc("", `{"step":{"id":"a","type":"NoOp","transition":{"successors":{"b":"@@"}}}},{"step":{"id":"b","type":"NoOp"}}`), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assertProblems(t, tc.v.Validate(mustDecode(t, tc.doc)), tc.wants...)
		})
	}
}

func TestValidateNil(t *testing.T) {
	t.Parallel()
	assertProblems(t, Validator{}.Validate(nil), want{"", "definition is required"})
	assertProblems(t, Validator{}.ValidateProperties(nil), want{"", "properties are required"})
	var d Definition
	d.Workflow = Workflow{ID: "w", Steps: []StepNode{{}}}
	assertProblems(t, Validator{}.Validate(&d), want{"workflow.steps[0]", "a step must be one of"})
	d.Workflow.Steps = []StepNode{{Step: &Step{StepCommon: StepCommon{ID: "a"}, Type: StepTypeNoOp}, While: &While{}}}
	assertProblems(t, Validator{}.Validate(&d), want{"workflow.steps[0]", "exactly one of"})
}

func TestCanonicalStepType(t *testing.T) {
	t.Parallel()
	if got, ok := (Validator{}).CanonicalStepType("http"); !ok || got != "Http" {
		t.Fatalf("got %q %v", got, ok)
	}
	if _, ok := (Validator{StepTypes: []string{"X"}}).CanonicalStepType("NoOp"); ok {
		t.Fatal("NoOp accepted by a validator that only knows X")
	}
}

func TestCheckExpressionResultsAreCached(t *testing.T) {
	t.Parallel()
	calls := map[string]int{}
	v := Validator{CheckExpression: func(e string) error { calls[e]++; return nil }}
	d := mustDecode(t, string(readFile(t, "testdata/dag.json")))
	if err := v.Validate(d); err != nil {
		t.Fatal(err)
	}
	if calls["true"] != 1 {
		t.Fatalf("\"true\" checked %d times", calls["true"])
	}
}

// A typed step with a sub_type counts its job template's params as its
// own: a Notebook step whose template provides the notebook param is
// valid, the template is asked at the workflow's job_template_version, and
// the template lookup's error is reported on the step's sub_type.
func TestValidateJobTemplateParams(t *testing.T) {
	def := func(version string) *Definition {
		d, err := DecodeJSON([]byte(`{"workflow":{"id":"wf","params":{"job_template_version":{"type":"STRING","value":"` + version + `"}},
		  "steps":[{"step":{"id":"nb","type":"Notebook","sub_type":"shell","params":{"script":{"type":"STRING","value":"echo"}}}}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var asked []string
	v := Validator{JobTemplateParams: func(stepType, jobType, version string) (Params, error) {
		asked = append(asked, stepType+"/"+jobType+"/"+version)
		if version == "broken" {
			return nil, errors.New("job template shell is for Http steps")
		}
		return Params{"notebook": {Type: ParamTypeMap, Value: map[string]Param{"input_path": LiteralParam(ParamTypeString, "s3://b/k")}}}, nil
	}}
	if err := v.Validate(def("v1")); err != nil {
		t.Fatalf("step with the template's notebook param refused: %v", err)
	}
	if len(asked) != 1 || asked[0] != "Notebook/shell/v1" {
		t.Fatalf("asked %v, want Notebook/shell/v1", asked)
	}
	err := v.Validate(def("broken"))
	if err == nil || !strings.Contains(err.Error(), "workflow.steps[0].step.sub_type: job template shell is for Http steps") {
		t.Fatalf("err = %v", err)
	}
	if err := (Validator{}).Validate(def("v1")); err == nil || !strings.Contains(err.Error(), "needs the notebook param") {
		t.Fatalf("without templates: err = %v", err)
	}
	// A version computed at run time: what the step inherits is known
	// then, and the push does not ask.
	asked = nil
	if err := v.Validate(def("${other}")); err != nil || len(asked) != 0 {
		t.Fatalf("computed version: err = %v, asked %v", err, asked)
	}
}

// MergeParams merges literal MAPs member by member and STRING_MAPs entry
// by entry, over's winning; other params are replaced.
func TestMergeParams(t *testing.T) {
	base := Params{
		"m":  {Type: ParamTypeMap, Value: map[string]Param{"a": LiteralParam(ParamTypeString, "base"), "b": LiteralParam(ParamTypeString, "base")}, Mode: ParamModeImmutable},
		"sm": {Type: ParamTypeStringMap, Value: map[string]any{"k1": "base", "k2": "base"}},
		"s":  LiteralParam(ParamTypeString, "base"),
	}
	over := Params{
		"m":  {Type: ParamTypeMap, Value: map[string]Param{"b": LiteralParam(ParamTypeString, "over")}},
		"sm": {Type: ParamTypeStringMap, Value: map[string]any{"k2": "over"}},
		"s":  LiteralParam(ParamTypeString, "over"),
	}
	got := MergeParams(base, over)
	m, _ := got["m"].MapValue()
	if m["a"].Value != "base" || m["b"].Value != "over" || got["m"].Mode != ParamModeImmutable {
		t.Fatalf("m = %+v", got["m"])
	}
	if sm := got["sm"].Value.(map[string]any); sm["k1"] != "base" || sm["k2"] != "over" {
		t.Fatalf("sm = %v", sm)
	}
	if got["s"].Value != "over" {
		t.Fatalf("s = %v", got["s"].Value)
	}
	if bm, _ := base["m"].MapValue(); len(bm) != 2 || bm["b"].Value != "base" {
		t.Fatalf("base changed: %+v", base["m"])
	}
}

// TestMergeParamsKeepsValidatorsAndTags: a param merged over another keeps
// the other's validator unless it brings one, and their tags join (its own
// winning on a name), as Maestro's merge does.
func TestMergeParamsKeepsValidatorsAndTags(t *testing.T) {
	guarded := LiteralParam(ParamTypeLong, json.Number("3"))
	guarded.Validator = "param > 0"
	guarded.Tags = Tags{NewTag("pii"), NewTag("owner")}
	own := LiteralParam(ParamTypeLong, json.Number("1"))
	own.Validator = "param < 10"
	tagged := LiteralParam(ParamTypeLong, json.Number("2"))
	tagged.Tags = Tags{{Name: "owner", Namespace: "PLATFORM"}, NewTag("new")}
	got := MergeParams(Params{"a": guarded, "b": guarded, "c": guarded},
		Params{"a": LiteralParam(ParamTypeLong, json.Number("-1")), "b": own, "c": tagged})
	if got["a"].Validator != "param > 0" || got["a"].Value != json.Number("-1") {
		t.Errorf("a value given alone: %+v, want the base's validator kept", got["a"])
	}
	if got["b"].Validator != "param < 10" {
		t.Errorf("b with its own validator: %q", got["b"].Validator)
	}
	if names := got["c"].Tags.Names(); !slices.Equal(names, []string{"pii", "owner", "new"}) || got["c"].Tags[1].Namespace != "PLATFORM" {
		t.Errorf("c's tags = %+v, want pii, then its own owner (PLATFORM) and new", got["c"].Tags)
	}
	if len(guarded.Tags) != 2 {
		t.Errorf("the base's tags changed: %+v", guarded.Tags)
	}
}
