package params

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// dryRunParams are Maestro's dry-run params (its default-dry-run-params):
// a workflow param of one of these names and type is given this value in
// the dry run, so a date range that is meant to be passed at start does not
// fail the push.
var dryRunParams = workflow.Params{
	"FROM_DATE": {Type: workflow.ParamTypeString, Value: "20210101"},
	"TO_DATE":   {Type: workflow.ParamTypeString, Value: "20210101"},
}

// dryRunTimeout bounds the dry run of one push.
const dryRunTimeout = 5 * time.Second

// DryRun checks at push what would fail every run of wf, as Maestro's dry
// run does before it stores a version:
//
//   - the workflow params evaluate (validators included) for a manual run 1
//     of instance 1 started now, with FROM_DATE and TO_DATE given as
//     Maestro's dry run gives them;
//   - every validator compiles, and a step param given as a plain literal
//     (no expression, nothing interpolated) satisfies its validator when
//     that can be decided from the literal alone.
//
// Every problem is reported, joined.
func DryRun(ctx context.Context, wf *workflow.Workflow) error {
	ctx, cancel := context.WithTimeout(ctx, dryRunTimeout)
	defer cancel()
	var errs []error
	runParams := workflow.Params{}
	for name, p := range dryRunParams {
		if d, ok := wf.Params[name]; ok && d.Type == p.Type {
			runParams[name] = p
		}
	}
	if _, err := EvaluateWorkflow(ctx, WorkflowInput{Workflow: wf, RunParams: runParams, InstanceID: 1, RunID: 1,
		DryRun: true}); err != nil {
		errs = append(errs, fmt.Errorf("workflow params: %w", err))
	}
	workflow.WalkSteps(wf.Steps, func(path string, n *workflow.StepNode, _ int) bool {
		at := "steps" + path + "." + string(n.Kind()) + "." + n.ID()
		errs = append(errs, checkStepParams(ctx, at, n)...)
		return true
	})
	return errors.Join(errs...)
}

// checkStepParams reports a step's literal param values its validators
// refuse (the params a step kind requires are the validator's to check:
// workflow.Validator).
func checkStepParams(ctx context.Context, at string, n *workflow.StepNode) []error {
	var errs []error
	own := n.Common().Params
	for _, name := range slices.Sorted(maps.Keys(own)) {
		errs = append(errs, checkValidators(ctx, at+".params."+name, own[name])...)
	}
	return errs
}

// checkValidators compiles a param's validator (and those of a MAP's
// members) and checks a plain literal value against it.
func checkValidators(ctx context.Context, at string, p workflow.Param) []error {
	var errs []error
	if nested, ok := p.MapValue(); ok {
		for _, name := range slices.Sorted(maps.Keys(nested)) {
			if err := compileOnly(nested[name].Validator); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w", at, name, err))
			}
		}
	}
	if p.Validator == "" {
		return errs
	}
	if err := compileOnly(p.Validator); err != nil {
		return append(errs, fmt.Errorf("%s: %w", at, err))
	}
	if p.Expression != nil || p.Value == nil || hasDollar(p.Value) {
		return errs // known at run time only
	}
	if _, isMap := p.MapValue(); isMap {
		return errs
	}
	v, err := Convert(p.Type, p.Value)
	if err != nil {
		return errs // the run reports it with the value's context
	}
	c, err := compileValidator(p.Validator, funcSet{})
	if err != nil {
		return errs
	}
	// A SEL validator that reads other params cannot be decided here; only
	// a definite "no" is a problem.
	var no *refusal
	if err := c.check(ctx, v, emptyEnv{}); errors.As(err, &no) {
		errs = append(errs, fmt.Errorf("%s: %w", at, err))
	}
	return errs
}

// compileOnly reports a validator that does not compile.
func compileOnly(src string) error {
	if src == "" {
		return nil
	}
	if err := CheckValidator(src); err != nil {
		return fmt.Errorf("invalid validator: %w", err)
	}
	return nil
}

// hasDollar reports whether a literal value interpolates anything.
func hasDollar(v any) bool {
	for _, s := range stringsIn(v) {
		if strings.Contains(s, "$") {
			return true
		}
	}
	return false
}

// emptyEnv resolves no names.
type emptyEnv struct{}

func (emptyEnv) Lookup(string) (any, bool) { return nil, false }
