package workflow

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// DecodeYAML converts a YAML DSL document to the model:
//
//	Workflow:
//	  id: demo.pipeline
//	  jobs:
//	    - job:
//	        id: step1
//	        type: NoOp
//	        '!dates': return new int[]{20220101,20220102};   # SEL expression param
//	    - foreach:
//	        id: step2
//	        params:
//	          date: ${dates@step1}                           # upstream step param
//	        jobs:
//	          - job: {id: backfill, type: Notebook, notebook: {input_path: s3://x, arg1: $date}}
//
// Keys the DSL does not reserve become parameters: a leading '!' marks a SEL expression, a
// "<type>" suffix sets the type (long, double, boolean, string, map, pmap, array<long>, ...) and
// "(mode)" the mode; otherwise literals infer their type (integer LONG, float DOUBLE, boolean,
// string, lists by their elements, maps of strings STRING_MAP, other maps MAP). A string that is
// exactly ${name@step} or ${step__name} becomes an expression reading that step's parameter.
// Jobs run in list order unless a job has a transition ("job_id", "IF cond THEN job_id",
// "OTHERWISE job_id") or the list has a dag ("sequential", "parallel" or a transition map).
// docs/workflow-definition.md describes the mapping. Problems are reported with DSL paths
// ("Workflow.jobs[1].foreach.params.date") and source lines; errors are *ValidationError.
func DecodeYAML(data []byte) (*Definition, error) {
	root, probs := parseYAML(data)
	c := &dslConverter{stepParams: map[string]Params{}}
	c.list = append(c.list, probs...)
	var d *Definition
	if root != nil && len(probs) == 0 {
		d = c.document(root)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return d, nil
}

// dslConverter builds the model from a DSL node tree, binding embedded blocks that use the JSON
// shape (retry_policy, time_triggers, ...) with the strict binder.
type dslConverter struct {
	binder
	stepParams map[string]Params // params of each job by step id, to type ${name@step}
	pending    []pendingRef
}

// pendingRef is a parameter set to another step's parameter whose type is only known once all
// jobs are converted.
type pendingRef struct {
	into        Params
	name        string
	step, param string
}

func (c *dslConverter) document(root *node) *Definition {
	if !c.expect(root, kindObject, "") {
		return nil
	}
	var wf *node
	wfKey := ""
	for i, k := range root.keys {
		switch k {
		case "Workflow", "workflow":
			if wf != nil {
				c.add(k, "only one Workflow key is allowed")
				continue
			}
			wf, wfKey = root.vals[i], k
		default:
			c.add(joinKey("", k), "unknown field; a DSL document holds a single Workflow key"+root.vals[i].pos())
		}
	}
	if wf == nil {
		c.add("", "the Workflow key is missing")
		return nil
	}
	d := &Definition{}
	c.workflow(wf, wfKey, d)
	c.resolvePending()
	return d
}

func (c *dslConverter) workflow(n *node, path string, d *Definition) {
	if !c.expect(n, kindObject, path) {
		return
	}
	w := &d.Workflow
	props := &Properties{}
	params := Params{}
	var jobs, dag *node
	var concurrency *int64
	for i, k := range n.keys {
		v, kp := n.vals[i], joinKey(path, k)
		switch k {
		case "id":
			c.bindInto(v, &w.ID, kp)
		case "name":
			c.bindInto(v, &w.Name, kp)
		case "description":
			c.bindInto(v, &w.Description, kp)
		case "tags":
			c.bindInto(v, &w.Tags, kp)
		case "timeout":
			c.bindInto(v, &w.Timeout, kp)
		case "criticality":
			c.bindInto(v, &w.Criticality, kp)
		case "instance_step_concurrency":
			c.bindInto(v, &w.InstanceStepConcurrency, kp)
		case "time_triggers":
			c.bindInto(v, &w.TimeTriggers, kp)
		case "signal_triggers":
			c.bindInto(v, &w.SignalTriggers, kp)
		case "owner":
			c.bindInto(v, &props.Owner, kp)
		case "run_strategy":
			c.bindInto(v, &props.RunStrategy, kp)
		case "workflow_concurrency":
			c.bindInto(v, &concurrency, kp)
		case "step_concurrency":
			c.bindInto(v, &props.StepConcurrency, kp)
		case "run_retention_days":
			c.bindInto(v, &props.RunRetentionDays, kp)
		case "access_control":
			c.bindInto(v, &props.AccessControl, kp)
		case "alerting":
			c.bindInto(v, &props.Alerting, kp)
		case "alerting_disabled":
			c.bindInto(v, &props.AlertingDisabled, kp)
		case "signal_trigger_disabled":
			c.bindInto(v, &props.SignalTriggerDisabled, kp)
		case "time_trigger_disabled":
			c.bindInto(v, &props.TimeTriggerDisabled, kp)
		case "is_active":
			c.bindInto(v, &d.IsActive, kp)
		case "params":
			c.paramBlock(v, kp, params)
		case "jobs":
			jobs = v
		case "dag":
			dag = v
		default:
			c.param(k, v, kp, params)
		}
	}
	if concurrency != nil {
		if props.RunStrategy == nil {
			props.RunStrategy = &RunStrategy{Rule: RunStrategyParallel}
		}
		props.RunStrategy.WorkflowConcurrency = concurrency
		props.RunStrategy.form = runStrategyObject
	}
	if len(params) > 0 {
		w.Params = params
	}
	if !reflect.ValueOf(*props).IsZero() {
		d.Properties = props
	}
	if jobs == nil {
		c.add(joinKey(path, "jobs"), "at least one job is required")
		return
	}
	w.Steps = c.jobs(jobs, joinKey(path, "jobs"), dag, joinKey(path, "dag"))
}

// jobState collects what the common job keys produce.
type jobState struct {
	common        *StepCommon
	params        Params
	hasTransition bool
}

// commonKey handles the keys every job kind shares and reports whether k was one of them.
func (c *dslConverter) commonKey(st *jobState, k string, v *node, kp string) bool {
	cm := st.common
	switch k {
	case "id":
		c.bindInto(v, &cm.ID, kp)
	case "name":
		c.bindInto(v, &cm.Name, kp)
	case "description":
		c.bindInto(v, &cm.Description, kp)
	case "failure_mode":
		c.bindInto(v, &cm.FailureMode, kp)
	case "tags":
		c.bindInto(v, &cm.Tags, kp)
	case "timeout":
		c.bindInto(v, &cm.Timeout, kp)
	case "signal_dependencies":
		c.bindInto(v, &cm.SignalDependencies, kp)
	case "signal_outputs":
		c.bindInto(v, &cm.SignalOutputs, kp)
	case "transition":
		if succ := c.transitions(v, kp); len(succ) > 0 {
			cm.Transition = &Transition{Successors: succ}
			st.hasTransition = true
		}
	default:
		return false
	}
	return true
}

func (c *dslConverter) jobs(n *node, path string, dag *node, dagPath string) []StepNode {
	if !c.expect(n, kindArray, path) {
		return nil
	}
	steps := make([]StepNode, 0, len(n.items))
	explicit := false
	for i, it := range n.items {
		sn, hasTransition := c.job(it, joinIndex(path, i))
		steps = append(steps, sn)
		explicit = explicit || hasTransition
	}
	c.applyDag(steps, dag, dagPath, explicit)
	return steps
}

var jobKinds = map[string]StepKind{
	"job": StepKindStep, "subworkflow": StepKindSubworkflow, "foreach": StepKindForeach, "while": StepKindWhile,
}

func (c *dslConverter) job(n *node, path string) (StepNode, bool) {
	if !c.expect(n, kindObject, path) {
		return StepNode{}, false
	}
	if len(n.keys) != 1 {
		c.addf(path, "a job entry must have exactly one key: job, foreach, while or subworkflow; got %s%s",
			strings.Join(n.keys, ", "), n.pos())
		return StepNode{}, false
	}
	key, body := n.keys[0], n.vals[0]
	kind, ok := jobKinds[key]
	kp := joinKey(path, key)
	if !ok {
		c.addf(kp, "unknown job kind %q; expected job, foreach, while or subworkflow%s", key, body.pos())
		return StepNode{}, false
	}
	if !c.expect(body, kindObject, kp) {
		return StepNode{}, false
	}
	var sn StepNode
	st := &jobState{params: Params{}}
	switch kind {
	case StepKindStep:
		sn.Step = &Step{}
		st.common = &sn.Step.StepCommon
		c.typedJob(sn.Step, st, body, kp)
	case StepKindSubworkflow:
		sn.Subworkflow = &Subworkflow{}
		st.common = &sn.Subworkflow.StepCommon
		c.subworkflowJob(sn.Subworkflow, st, body, kp)
	case StepKindForeach:
		sn.Foreach = &Foreach{}
		st.common = &sn.Foreach.StepCommon
		c.loopJob(sn.Foreach, nil, st, body, kp)
	case StepKindWhile:
		sn.While = &While{}
		st.common = &sn.While.StepCommon
		c.loopJob(nil, sn.While, st, body, kp)
	}
	if len(st.params) > 0 {
		st.common.Params = st.params
	}
	if id := st.common.ID; id != "" {
		if _, seen := c.stepParams[id]; !seen {
			c.stepParams[id] = st.params
		}
	}
	return sn, st.hasTransition
}

func (c *dslConverter) typedJob(s *Step, st *jobState, body *node, path string) {
	var config map[string]ConfigCheck
	if t := body.get("type"); t != nil && t.kind == kindString {
		for name, fields := range DefaultStepConfig() {
			if strings.EqualFold(name, t.text) {
				config = fields
			}
		}
	}
	for i, k := range body.keys {
		v, kp := body.vals[i], joinKey(path, k)
		if c.commonKey(st, k, v, kp) {
			continue
		}
		switch k {
		case "type":
			c.bindInto(v, &s.Type, kp)
		case "sub_type":
			c.bindInto(v, &s.SubType, kp)
		case "retry_policy":
			c.bindInto(v, &s.RetryPolicy, kp)
		case "params":
			c.paramBlock(v, kp, st.params)
		default:
			if _, ok := config[k]; ok {
				if s.Config == nil {
					s.Config = map[string]json.RawMessage{}
				}
				s.Config[k] = v.rawJSON()
				continue
			}
			c.param(k, v, kp, st.params)
		}
	}
}

func (c *dslConverter) subworkflowJob(s *Subworkflow, st *jobState, body *node, path string) {
	var workflowID, version *node
	for i, k := range body.keys {
		v, kp := body.vals[i], joinKey(path, k)
		if c.commonKey(st, k, v, kp) {
			continue
		}
		switch k {
		case "workflow_id", "subworkflow_id":
			if c.expect(v, kindString, kp) {
				workflowID = v
			}
		case "version", "subworkflow_version":
			if v.kind == kindNumber { // a version number written bare
				v = &node{kind: kindString, text: v.text}
			}
			if c.expect(v, kindString, kp) {
				version = v
			}
		case "sync":
			c.bindInto(v, &s.Sync, kp)
		case "explicit_params":
			c.bindInto(v, &s.ExplicitParams, kp)
		case "params":
			c.paramBlock(v, kp, st.params)
		default:
			c.param(k, v, kp, st.params)
		}
	}
	id := s.ID
	if workflowID != nil {
		id = workflowID.text
	}
	st.params[ParamSubworkflowID] = LiteralParam(ParamTypeString, id)
	if version != nil {
		st.params[ParamSubworkflowVersion] = LiteralParam(ParamTypeString, version.text)
	}
}

// loopJob converts a foreach (f set) or while (w set) job.
func (c *dslConverter) loopJob(f *Foreach, w *While, st *jobState, body *node, path string) {
	loop := Params{}
	var jobs, dag, ranges *node
	hasLoop := false
	for i, k := range body.keys {
		v, kp := body.vals[i], joinKey(path, k)
		if c.commonKey(st, k, v, kp) {
			continue
		}
		switch {
		case k == "params" || k == "loop_params":
			c.paramBlock(v, kp, loop)
			hasLoop = true
		case k == "jobs":
			jobs = v
		case k == "dag":
			dag = v
		case f != nil && (k == "concurrency" || k == "job_concurrency"):
			c.bindInto(v, &f.Concurrency, kp)
		case f != nil && k == "strict_ordering":
			c.bindInto(v, &f.StrictOrdering, kp)
		case f != nil && k == "ranges":
			ranges = v
			hasLoop = true
		case w != nil && k == "condition":
			c.scalarText(v, kp, &w.Condition)
		default:
			c.param(k, v, kp, st.params)
		}
	}
	if ranges != nil {
		c.ranges(ranges, joinKey(path, "ranges"), loop)
	}
	if f != nil || hasLoop {
		st.params[ParamLoopParams] = LiteralParam(ParamTypeMap, map[string]Param(loop))
	}
	jobsPath := joinKey(path, "jobs")
	if jobs == nil {
		c.add(jobsPath, "at least one job is required")
		return
	}
	steps := c.jobs(jobs, jobsPath, dag, joinKey(path, "dag"))
	if f != nil {
		f.Steps = steps
	} else {
		w.Steps = steps
	}
}

// ranges turns {name: {from, to, increment}} into LONG_ARRAY loop parameters computed with
// Util.intsBetween(from, to, increment); from defaults to 0 and increment to 1.
func (c *dslConverter) ranges(n *node, path string, loop Params) {
	if !c.expect(n, kindObject, path) {
		return
	}
	for i, name := range n.keys {
		rp := joinKey(path, name)
		var r struct {
			From      *int64 `json:"from"`
			To        *int64 `json:"to"`
			Increment *int64 `json:"increment"`
		}
		c.bindInto(n.vals[i], &r, rp)
		if r.To == nil {
			c.add(joinKey(rp, "to"), "to is required")
			continue
		}
		from, inc := int64(0), int64(1)
		if r.From != nil {
			from = *r.From
		}
		if r.Increment != nil {
			inc = *r.Increment
		}
		if inc == 0 {
			c.add(joinKey(rp, "increment"), "increment must not be 0")
			continue
		}
		if _, dup := loop[name]; dup {
			c.addf(rp, "loop parameter %q is defined twice", name)
			continue
		}
		loop[name] = ExpressionParam(ParamTypeLongArray, "Util.intsBetween("+itoa(from)+", "+itoa(*r.To)+", "+itoa(inc)+");")
	}
}

// transitions parses a job's transition list into successors and their conditions.
func (c *dslConverter) transitions(n *node, path string) map[string]string {
	var items []*node
	switch n.kind {
	case kindNull:
		return nil
	case kindString:
		items = []*node{n}
	case kindArray:
		items = n.items
	default:
		c.addf(path, "expected a list of transitions, got %s%s", n.kind, n.pos())
		return nil
	}
	succ := map[string]string{}
	var conds []string
	for i, it := range items {
		ip := path
		if n.kind == kindArray {
			ip = joinIndex(path, i)
		}
		if !c.expect(it, kindString, ip) {
			continue
		}
		line := strings.TrimSpace(it.text)
		if line == "" {
			continue
		}
		target, cond, ok := parseTransition(line)
		switch {
		case !ok:
			c.addf(ip, "invalid transition %q; expected \"job_id\", \"IF condition THEN job_id\" or \"OTHERWISE job_id\"%s", line, it.pos())
			continue
		case cond == otherwiseMarker:
			if i != len(items)-1 {
				c.add(ip, "OTHERWISE must be the last transition"+it.pos())
				continue
			}
			cond = "true"
			if len(conds) > 0 {
				cond = "!((" + strings.Join(conds, ") || (") + "))"
			}
		case cond != "true":
			conds = append(conds, cond)
		}
		if _, dup := succ[target]; dup {
			c.addf(ip, "successor %q is listed twice%s", target, it.pos())
			continue
		}
		succ[target] = cond
	}
	return succ
}

const otherwiseMarker = "\x00otherwise"

var (
	simpleTransition    = regexp.MustCompile(`^([_a-zA-Z][.\-_a-zA-Z0-9]*)$`)
	ifTransition        = regexp.MustCompile(`(?is)^IF\s+(.+?)\s+THEN\s+([_a-zA-Z][.\-_a-zA-Z0-9]*)$`)
	otherwiseTransition = regexp.MustCompile(`(?i)^OTHERWISE\s+([_a-zA-Z][.\-_a-zA-Z0-9]*)$`)
)

// parseTransition returns the successor and its condition ("true" when unconditional,
// otherwiseMarker for OTHERWISE).
func parseTransition(line string) (target, cond string, ok bool) {
	if m := otherwiseTransition.FindStringSubmatch(line); m != nil {
		return m[1], otherwiseMarker, true
	}
	if m := ifTransition.FindStringSubmatch(line); m != nil {
		return m[2], strings.TrimSpace(m[1]), true
	}
	if m := simpleTransition.FindStringSubmatch(line); m != nil {
		return m[1], "true", true
	}
	return "", "", false
}

// applyDag adds transitions to a job list: the dag key's order or map when given, else a
// sequential chain unless some job declares its own transitions.
func (c *dslConverter) applyDag(steps []StepNode, dag *node, path string, explicit bool) {
	sequential := func() {
		for i := 0; i+1 < len(steps); i++ {
			cm := steps[i].Common()
			next := steps[i+1].ID()
			if cm == nil || next == "" || (cm.Transition != nil && len(cm.Transition.Successors) > 0) {
				continue
			}
			cm.Transition = &Transition{Successors: map[string]string{next: "true"}}
		}
	}
	if dag == nil || dag.kind == kindNull {
		if !explicit {
			sequential()
		}
		return
	}
	switch dag.kind {
	case kindString:
		switch strings.ToLower(strings.TrimSpace(dag.text)) {
		case "sequential":
			sequential()
		case "parallel":
		default:
			c.addf(path, "unknown dag order %q; expected sequential, parallel or a map of transitions%s", dag.text, dag.pos())
		}
	case kindObject:
		byID := map[string]*StepCommon{}
		for i := range steps {
			if cm := steps[i].Common(); cm != nil {
				byID[cm.ID] = cm
			}
		}
		for i, id := range dag.keys {
			kp := joinKey(path, id)
			cm, ok := byID[id]
			if !ok {
				c.addf(kp, "dag refers to unknown job %q%s", id, dag.vals[i].pos())
				continue
			}
			succ := c.transitions(dag.vals[i], kp)
			if len(succ) > 0 && (cm.Transition == nil || len(cm.Transition.Successors) == 0) {
				cm.Transition = &Transition{Successors: succ}
			}
		}
	default:
		c.addf(path, "expected sequential, parallel or a map of transitions, got %s%s", dag.kind, dag.pos())
	}
}

// scalarText reads a string, number or boolean as text (for SEL expressions written bare).
func (c *dslConverter) scalarText(v *node, path string, into *string) bool {
	switch v.kind {
	case kindString, kindNumber:
		*into = v.text
	case kindBool:
		*into = "false"
		if v.b {
			*into = "true"
		}
	default:
		c.addf(path, "expected an expression, got %s%s", v.kind, v.pos())
		return false
	}
	return true
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
