package params

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/maestro-aws/maestro/engine/workflow"
	"github.com/maestro-aws/maestro/sel"
)

// Maestro's default workflow params (its default-workflow-params.yaml), set
// for every run, manual or triggered, before the definition's own params.
// They are SEL expressions with Maestro's semantics, so a run param that
// overrides one of them (RUN_TS for a backfill, WORKFLOW_CRON_TIMEZONE)
// flows into those that read it. Every one is MUTABLE_ON_START. RUN_TS is
// a value: the fire time for a time-triggered run (the trigger passes it
// as a run param), else the time of the start.
const (
	// DSLDefaultTZ is the first time trigger's zone, else UTC.
	DSLDefaultTZ = "DSL_DEFAULT_TZ"
	// WorkflowCronTimezone is the zone of the trigger that started the
	// run, else DSL_DEFAULT_TZ.
	WorkflowCronTimezone = "WORKFLOW_CRON_TIMEZONE"
)

// Fields params.getFromInstance reads, as Maestro names them.
const (
	InitiatorTimezone   = "INITIATOR_TIMEZONE"
	InitiatorType       = "INITIATOR_TYPE"
	InitiatorRunnerName = "INITIATOR_RUNNER_NAME"
	RunPolicy           = "RUN_POLICY"
	// Owner is also the default param holding the workflow's owner.
	Owner = "owner"
)

// Run policies params.getFromInstance("RUN_POLICY") answers, as Maestro's.
const (
	PolicyStartFresh = "START_FRESH_NEW_RUN"
	// dryRunInitiator is INITIATOR_TYPE during the dry run at push.
	dryRunInitiator = "VALIDATION"
)

// localDate is Maestro's expression for a date or an hour of a time param
// in a zone: new DateTime(ts).withZone(zone) shifted and formatted.
func localDate(ts, zone, shift, format string) string {
	return fmt.Sprintf(`DateTime utcNow = new DateTime(%s); DateTime localNow = utcNow.withZone(DateTimeZone.forID(%s)); localNow%s.toString("%s");`,
		ts, zone, shift, format)
}

// defaultExpressions are the default params with expressions.
var defaultExpressions = map[string]string{
	DSLDefaultTZ: `String timezone = params.getFromInstance("FIRST_TIME_TRIGGER_TIMEZONE");
        return timezone != null && !timezone.isEmpty() ? timezone : "UTC";`,
	WorkflowCronTimezone: `String INITIATOR_TIMEZONE = params.getFromInstance("INITIATOR_TIMEZONE");
        return INITIATOR_TIMEZONE != null && !INITIATOR_TIMEZONE.isEmpty() ? INITIATOR_TIMEZONE : DSL_DEFAULT_TZ;`,
	"TARGET_RUN_DATE": localDate("RUN_TS", "WORKFLOW_CRON_TIMEZONE", "", "yyyyMMdd"),
	"TARGET_RUN_HOUR": localDate("RUN_TS", "WORKFLOW_CRON_TIMEZONE", "", "HH"),
	"DERIVED_RUN_TS": `DateTimeFormatter tz_dateint_hour_formatter = DateTimeFormat.forPattern("yyyyMMddHH")
          .withZone(DateTimeZone.forID(WORKFLOW_CRON_TIMEZONE));
        DateTime dt = tz_dateint_hour_formatter.parseDateTime(TARGET_RUN_DATE + TARGET_RUN_HOUR);
        dt.getMillis();`,
	"DERIVED_RUN_DATE_US_PACIFIC":           localDate("DERIVED_RUN_TS", `"America/Los_Angeles"`, "", "yyyyMMdd"),
	"DERIVED_RUN_DATE_US_PACIFIC_MINUS_ONE": localDate("DERIVED_RUN_TS", `"America/Los_Angeles"`, ".minusDays(1)", "yyyyMMdd"),
	"DERIVED_RUN_DATE_UTC":                  localDate("DERIVED_RUN_TS", `"UTC"`, "", "yyyyMMdd"),
	"DERIVED_RUN_DATE_UTC_MINUS_ONE":        localDate("DERIVED_RUN_TS", `"UTC"`, ".minusDays(1)", "yyyyMMdd"),
	"DERIVED_RUN_DATE_UTC_PLUS_ONE":         localDate("DERIVED_RUN_TS", `"UTC"`, ".plusDays(1)", "yyyyMMdd"),
	"DERIVED_RUN_DATE_UTC_MINUS_ONE_HOUR":   localDate("DERIVED_RUN_TS", `"UTC"`, ".minusHours(1)", "yyyyMMdd"),
	"DERIVED_RUN_DATE_UTC_PLUS_ONE_HOUR":    localDate("DERIVED_RUN_TS", `"UTC"`, ".plusHours(1)", "yyyyMMdd"),
	"DERIVED_RUN_HOUR_US_PACIFIC":           localDate("DERIVED_RUN_TS", `"America/Los_Angeles"`, "", "HH"),
	"DERIVED_RUN_HOUR_UTC":                  localDate("DERIVED_RUN_TS", `"UTC"`, "", "HH"),
	"DERIVED_RUN_HOUR_UTC_MINUS_ONE_HOUR":   localDate("DERIVED_RUN_TS", `"UTC"`, ".minusHours(1)", "HH"),
	"DERIVED_RUN_HOUR_UTC_PLUS_ONE_HOUR":    localDate("DERIVED_RUN_TS", `"UTC"`, ".plusHours(1)", "HH"),
	"LOCAL_RUN_DATE":                        localDate("RUN_TS", "WORKFLOW_CRON_TIMEZONE", "", "yyyyMMdd"),
	"RUN_DATE":                              localDate("RUN_TS", `"UTC"`, "", "yyyyMMdd"),
	// Maestro shifts RUN_TS before the zone for these two; in UTC it is the
	// same.
	"RUN_DATE_MINUS_1": localDate("RUN_TS", `"UTC"`, ".minusDays(1)", "yyyyMMdd"),
	"RUN_DATE_MINUS_7": localDate("RUN_TS", `"UTC"`, ".minusDays(7)", "yyyyMMdd"),
	// owner is RESERVED: the workflow's owner, set by Maestro.
	Owner: `return params.getFromInstance("owner");`,
}

// defaultParams returns the default workflow params with expressions,
// built once: callers copy them (WorkflowDefs) and never change them.
var defaultParams = sync.OnceValue(func() workflow.Params {
	out := make(workflow.Params, len(defaultExpressions))
	for name, expr := range defaultExpressions {
		typ := workflow.ParamTypeString
		if name == "DERIVED_RUN_TS" {
			typ = workflow.ParamTypeLong
		}
		e := expr
		mode := workflow.ParamModeMutableOnStart
		if name == Owner {
			mode = workflow.ParamModeConstant
		}
		out[name] = workflow.Param{Type: typ, Expression: &e, Mode: mode}
	}
	return out
})

// instanceKey carries the WorkflowInput of an evaluation to
// params.getFromInstance.
type instanceKey struct{}

// workflowFuncs are the functions workflow params may call.
var workflowFuncs = map[string]sel.Func{
	"params.getFromInstance":        getFromInstance,
	"params.getFromSignal":          getFromSignal,
	"params.getFromSignalOrDefault": getFromSignalOrDefault,
}

// DryRunSignalValue is what params.getFromSignal answers in the dry run at
// push (Maestro's DUMMY_VALIDATION_VALUE): a signal param is a STRING or a
// LONG, and this is both a date and a number.
const DryRunSignalValue = int64(20220101)

// getFromSignal answers params.getFromSignal where no SignalSource is
// given (a run's evaluation gets SignalFuncs instead, see
// EvaluateWorkflow): in the dry run at push it checks the names against
// the workflow's signal triggers and answers DryRunSignalValue; anywhere
// else there is no signal to read.
func getFromSignal(ctx context.Context, args []any) (any, error) {
	in, _ := ctx.Value(instanceKey{}).(*WorkflowInput)
	if in == nil || !in.DryRun {
		return nil, fmt.Errorf("%w: no signals are available here", ErrNoSignal)
	}
	names := make([]string, 0, len(args))
	for _, a := range args {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("params.getFromSignal takes strings")
		}
		names = append(names, s)
	}
	if len(names) != 1 && len(names) != 2 {
		return nil, fmt.Errorf("params.getFromSignal takes (paramName) or (signalName, paramName), got %d arguments", len(args))
	}
	if !signalNameDefined(in.Workflow, names) {
		return nil, fmt.Errorf("params.getFromSignal(%s): no signal trigger of the workflow defines it", strings.Join(names, ", "))
	}
	return DryRunSignalValue, nil
}

// getFromSignalOrDefault is params.getFromSignalOrDefault(signal, param,
// default): getFromSignal, or the default when that fails.
func getFromSignalOrDefault(ctx context.Context, args []any) (any, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("params.getFromSignalOrDefault takes (signalName, paramName, default), got %d arguments", len(args))
	}
	if v, err := getFromSignal(ctx, args[:2]); err == nil {
		return v, nil
	}
	return args[2], nil
}

// signalNameDefined reports whether a signal trigger of wf defines the
// param (names: one name) or the signal (names: signal and param).
func signalNameDefined(wf *workflow.Workflow, names []string) bool {
	for _, t := range wf.SignalTriggers {
		if len(names) == 1 {
			if _, ok := t.Params[names[0]]; ok {
				return true
			}
		} else if _, ok := t.Definitions[names[0]]; ok {
			return true
		}
	}
	return false
}

// defaultPrograms are the default params' expressions, compiled once: every
// run evaluates them, and compiling them each time cost about 200 µs a run.
var defaultPrograms = sync.OnceValue(func() map[string]*sel.Program {
	out := make(map[string]*sel.Program, len(defaultExpressions))
	for name, expr := range defaultExpressions {
		prog, err := sel.Compile(expr, sel.WithFunctions(workflowFuncs))
		if err != nil {
			panic(fmt.Sprintf("params: default param %s does not compile: %v", name, err))
		}
		out[name] = prog
	}
	return out
})

// runPolicy is Maestro's name of a run's policy: a start is
// START_FRESH_NEW_RUN, a restart its restart policy.
func runPolicy(p string) string {
	if p == "" || p == "START" {
		return PolicyStartFresh
	}
	return p
}

// precompiled returns the compiled program of a default param that still
// has its default expression, else nil.
func precompiled(name string, def workflow.Param) *sel.Program {
	if expr, ok := defaultExpressions[name]; !ok || def.Expression == nil || *def.Expression != expr {
		return nil
	}
	return defaultPrograms()[name]
}

// getFromInstance answers params.getFromInstance for a run's workflow
// params, as Maestro's does: the initiator's time zone and type, the first
// time trigger's zone, the run's ids. An unset field is "" (Maestro's
// "unset"); an unknown one is an error.
func getFromInstance(ctx context.Context, args []any) (any, error) {
	in, _ := ctx.Value(instanceKey{}).(*WorkflowInput)
	if in == nil {
		return nil, fmt.Errorf("params.getFromInstance is available to workflow params only")
	}
	if len(args) != 1 {
		return nil, fmt.Errorf("params.getFromInstance takes one field name, got %d arguments", len(args))
	}
	name, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("params.getFromInstance takes a string")
	}
	initiatorType, _ := in.Initiator["type"].(string)
	switch name {
	case InitiatorTimezone:
		if strings.EqualFold(initiatorType, "TIME") {
			tz, _ := in.Initiator["timezone"].(string)
			return tz, nil
		}
		return "", nil
	case InitiatorType:
		switch {
		case in.DryRun:
			return dryRunInitiator, nil
		case initiatorType == "":
			return "MANUAL", nil
		}
		return strings.ToUpper(initiatorType), nil
	case InitiatorRunnerName:
		if initiatorType != "" && !strings.EqualFold(initiatorType, "MANUAL") {
			return nil, fmt.Errorf("params.getFromInstance(%q) is only for a MANUAL run, not a %s one", name, initiatorType)
		}
		user, _ := in.Initiator["user"].(string)
		return user, nil
	case RunPolicy:
		return runPolicy(in.RunPolicy), nil
	case Owner:
		return in.Owner, nil
	case FirstTimeTriggerTimezone:
		if len(in.Workflow.TimeTriggers) > 0 {
			return in.Workflow.TimeTriggers[0].Timezone, nil
		}
		return "", nil
	case WorkflowID:
		return in.Workflow.ID, nil
	case WorkflowInstanceID:
		return in.InstanceID, nil
	case WorkflowRunID:
		return in.RunID, nil
	}
	return nil, fmt.Errorf("params.getFromInstance: unknown field %q", name)
}
