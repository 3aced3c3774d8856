package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits and defaults the validator applies, as in Maestro unless noted.
const (
	DefaultMaxSteps          = 1000 // steps per steps list (each foreach/while body is its own list)
	DefaultMaxDepth          = 10   // foreach/while/subworkflow nesting
	MaxIDLength              = 128
	MaxNameLength            = 256
	MaxDescriptionLength     = 16384
	MaxTimeoutSeconds        = 120 * 24 * 3600 // 120 days
	MaxInstanceStepConc      = 999             // instance_step_concurrency must be below 1000
	MaxForeachConcurrency    = 500
	ReservedPrefix           = "maestro_"
	ReservedSuffix           = "_maestro"
	minTimeTriggerIntervalMs = 60 * 1000
	// MaxSleepSeconds bounds a Sleep step's sleep_seconds, as a timeout.
	MaxSleepSeconds = MaxTimeoutSeconds
	// MaxIntervalDays bounds an INTERVAL time trigger's interval.
	MaxIntervalDays = 10 * 366
	// MaxEpochMillis is the last millisecond of the year 9999: the bound
	// of every epoch-milliseconds field (tct.completed_by_ts,
	// git_info.timestamp).
	MaxEpochMillis = 253402300799999
	// MaxAlertMinutes bounds the duration_minutes of alerting and tct:
	// 120 days, as a timeout.
	MaxAlertMinutes = MaxTimeoutSeconds / 60
	// MaxTagPermit bounds a tag's permit, as a tag permit's max_allowed.
	MaxTagPermit = 1<<31 - 1
)

// ConfigCheck validates the value of one type-specific field of a typed step; a nil check
// accepts any value.
type ConfigCheck func(value json.RawMessage) error

// DefaultStepConfig returns the type-specific fields a zero Validator accepts on typed steps,
// from the step-type table (Sleep's sleep_seconds: a number of seconds or a duration string).
func DefaultStepConfig() map[string]map[string]ConfigCheck {
	out := map[string]map[string]ConfigCheck{}
	for _, s := range stepTypeTable {
		if s.Config != nil {
			out[string(s.Type)] = s.Config
		}
	}
	return out
}

// Validator checks decoded definitions. The zero value uses the defaults. A Validator may be
// used from several goroutines at once when its CheckExpression is safe for that.
type Validator struct {
	// MaxSteps bounds the number of steps in one steps list; 0 means DefaultMaxSteps.
	MaxSteps int
	// MaxDepth bounds foreach/while/subworkflow nesting; 0 means DefaultMaxDepth.
	MaxDepth int
	// StepTypes is the set of accepted typed-step types, matched case-insensitively; nil means
	// DefaultStepTypes.
	StepTypes []string
	// StepConfig lists, per step type, the extra fields its steps may carry and how to check
	// them; nil means DefaultStepConfig.
	StepConfig map[string]map[string]ConfigCheck
	// CheckExpression parses a SEL expression and returns its error; nil only checks that
	// expressions are not empty.
	CheckExpression func(expr string) error
	// CheckParams checks a user-defined params map as a whole (for example that expressions
	// and interpolations do not depend on each other in a cycle); nil checks nothing more.
	CheckParams func(ps Params) error
	// JobTemplateParams returns the params a typed step with a sub_type
	// inherits from the job template of that job type at version (nil
	// when there is none), so that a param the template provides counts
	// as the step's; an error is reported on the step's sub_type. Nil
	// when job templates are not consulted.
	JobTemplateParams func(stepType, jobType, version string) (Params, error)
}

// DefaultStepTypes returns the step types a zero Validator accepts: those
// of the step-type table this deployment has runtimes for.
func DefaultStepTypes() []string {
	var out []string
	for _, s := range stepTypeTable {
		if s.Runs() {
			out = append(out, string(s.Type))
		}
	}
	return out
}

// notStepTypes are names written as step types in Maestro definitions that
// are no step type here, with what to do instead.
var notStepTypes = map[string]string{
	"join":     "a step's predecessors in the DAG already join",
	"template": "push the steps themselves",
}

// unbuiltStepType returns what to use instead of t (any spelling) when it
// is a type this deployment has no runtime for; "" otherwise.
func unbuiltStepType(t string) string {
	if instead := notStepTypes[strings.ToLower(t)]; instead != "" {
		return instead
	}
	st := StepType(t)
	st.normalize()
	if s, ok := stepTypeSpec(st); ok {
		return s.Instead
	}
	return ""
}

// CanonicalStepType returns the spelling under which t is configured, matching
// case-insensitively, and whether it is accepted.
func (v Validator) CanonicalStepType(t string) (string, bool) {
	types := v.StepTypes
	if types == nil {
		types = DefaultStepTypes()
	}
	for _, known := range types {
		if strings.EqualFold(known, t) {
			return known, true
		}
	}
	return "", false
}

// Validate checks a decoded definition and returns nil or a *ValidationError listing every
// problem found, sorted by path.
func (v Validator) Validate(d *Definition) error {
	if d == nil {
		return &ValidationError{Problems: []Problem{{Message: "definition is required"}}}
	}
	s := v.start()
	if d.Properties != nil {
		s.properties(d.Properties, rootLoc("properties"))
	}
	for _, k := range ReservedMetadataFields {
		if _, ok := d.Extra[k]; ok {
			s.reportf(rootLoc(k), "is set by Maestro and cannot be given in a push")
		}
	}
	if g := d.GitInfo; g != nil && g.Timestamp != nil && (*g.Timestamp < 0 || *g.Timestamp > MaxEpochMillis) {
		s.reportf(rootLoc("git_info").child("timestamp"), "must be between 0 and %d, got %d", int64(MaxEpochMillis), *g.Timestamp)
	}
	s.workflow(&d.Workflow, rootLoc("workflow"))
	return s.err()
}

// ValidateProperties checks a properties change set on its own.
func (v Validator) ValidateProperties(p *Properties) error {
	if p == nil {
		return &ValidationError{Problems: []Problem{{Message: "properties are required"}}}
	}
	s := v.start()
	s.properties(p, nil)
	return s.err()
}

// validation is the state of one Validate call.
type validation struct {
	problems
	maxSteps  int
	maxDepth  int
	types     map[string]bool // as configured and lower-cased
	typeNames string
	config    map[string]map[string]ConfigCheck // by type as configured and lower-cased
	check     func(string) error
	checkPs   func(Params) error
	exprCache map[string]error
	stepLocs  map[string]*loc // step id -> where it is defined
	templates func(stepType, jobType, version string) (Params, error)
	// templateVersion is the version of the job templates the workflow's
	// steps inherit from (its job_template_version param), and
	// templateVersionUnknown says that param is computed (known at run).
	templateVersion        string
	templateVersionUnknown bool
}

func (v Validator) start() *validation {
	s := &validation{
		maxSteps:  v.MaxSteps,
		maxDepth:  v.MaxDepth,
		check:     v.CheckExpression,
		checkPs:   v.CheckParams,
		templates: v.JobTemplateParams,
		types:     map[string]bool{},
		config:    map[string]map[string]ConfigCheck{},
		exprCache: map[string]error{},
	}
	if s.maxSteps <= 0 {
		s.maxSteps = DefaultMaxSteps
	}
	if s.maxDepth <= 0 {
		s.maxDepth = DefaultMaxDepth
	}
	types := v.StepTypes
	if types == nil {
		types = DefaultStepTypes()
	}
	for _, t := range types {
		s.types[t] = true
		s.types[strings.ToLower(t)] = true
	}
	s.typeNames = strings.Join(types, ", ")
	cfg := v.StepConfig
	if cfg == nil {
		cfg = DefaultStepConfig()
	}
	for t, fields := range cfg {
		s.config[t] = fields
		s.config[strings.ToLower(t)] = fields
	}
	return s
}

func (s *validation) workflow(w *Workflow, at *loc) {
	s.templateVersion, s.templateVersionUnknown = "", false
	if p, ok := w.Params[JobTemplateVersionParam]; ok {
		s.templateVersion, _ = p.Value.(string)
		s.templateVersionUnknown = p.Expression != nil || strings.Contains(s.templateVersion, "$")
	}
	s.workflowID(w.ID, at.child("id"))
	s.maxLen(w.Name, MaxNameLength, at.child("name"))
	s.maxLen(w.Description, MaxDescriptionLength, at.child("description"))
	s.tags(w.Tags, at.child("tags"))
	s.timeout(w.Timeout, at.child("timeout"))
	s.timeTriggers(w.TimeTriggers, at.child("time_triggers"))
	s.signalTriggers(w.SignalTriggers, at.child("signal_triggers"))
	if w.Criticality != "" && !w.Criticality.Valid() {
		s.reportf(at.child("criticality"), "unknown criticality %q; expected one of CRITICAL, HIGH, MEDIUM, LOW", w.Criticality)
	}
	if c := w.InstanceStepConcurrency; c != nil && (*c < 1 || *c > MaxInstanceStepConc) {
		s.reportf(at.child("instance_step_concurrency"), "must be between 1 and %d, got %d", MaxInstanceStepConc, *c)
	}
	s.params(w.Params, at.child("params"), true)
	steps := at.child("steps")
	s.stepLocs = make(map[string]*loc, len(w.Steps))
	s.collectStepIDs(w.Steps, steps)
	s.steps(w.Steps, steps, 0, nil)
}

// collectStepIDs records where each step id is defined and reports ids defined twice anywhere
// in the workflow, nested lists included.
func (s *validation) collectStepIDs(steps []StepNode, at *loc) {
	for i := range steps {
		n := &steps[i]
		kind := n.Kind()
		if kind == "" {
			continue
		}
		stepAt := at.at(i).child(string(kind))
		if id := n.ID(); id != "" {
			if first, dup := s.stepLocs[id]; dup {
				s.reportf(stepAt.child("id"), "duplicate step id %q, already defined at %s", id, first)
			} else {
				s.stepLocs[id] = stepAt
			}
		}
		if inner, _ := n.Children(); inner != nil {
			s.collectStepIDs(inner, stepAt.child("steps"))
		}
	}
}

// steps checks one steps list, its steps and its DAG. depth is the number of enclosing
// foreach/while blocks; loopNames holds the loop parameter names of enclosing loops.
func (s *validation) steps(list []StepNode, at *loc, depth int, loopNames map[string]bool) {
	if len(list) == 0 {
		s.report(at, "at least one step is required")
		return
	}
	if len(list) > s.maxSteps {
		s.reportf(at, "%d steps exceed the limit of %d steps per steps list", len(list), s.maxSteps)
	}
	for i := range list {
		s.stepNode(&list[i], at.at(i), depth, loopNames)
	}
	buildDAG(list, at, &s.problems, s.stepLocs)
}

func (s *validation) stepNode(n *StepNode, at *loc, depth int, loopNames map[string]bool) {
	kind := n.Kind()
	if kind == "" {
		s.report(at, "a step must be one of step, subworkflow, foreach or while")
		return
	}
	set := 0
	for _, ok := range [...]bool{n.Step != nil, n.Subworkflow != nil, n.Foreach != nil, n.While != nil} {
		if ok {
			set++
		}
	}
	if set > 1 {
		s.report(at, "a step wrapper must hold exactly one of step, subworkflow, foreach or while")
	}
	p := at.child(string(kind))
	s.stepCommon(n.Common(), p)
	level := depth
	if kind != StepKindStep {
		level++
		if level > s.maxDepth {
			s.reportf(p, "nesting depth %d exceeds the limit of %d", level, s.maxDepth)
		}
	}
	switch kind {
	case StepKindStep:
		s.typedStep(n.Step, p)
	case StepKindSubworkflow:
		s.subworkflow(n.Subworkflow, p)
	case StepKindForeach:
		names := s.loopParams(n.Foreach.Params, p, true, loopNames)
		if c := n.Foreach.Concurrency; c != nil && (*c < 1 || *c > MaxForeachConcurrency) {
			s.reportf(p.child("concurrency"), "must be between 1 and %d, got %d", MaxForeachConcurrency, *c)
		}
		if level <= s.maxDepth {
			s.steps(n.Foreach.Steps, p.child("steps"), depth+1, names)
		}
	case StepKindWhile:
		s.expr(n.While.Condition, p.child("condition"), "condition")
		names := s.loopParams(n.While.Params, p, false, loopNames)
		if level <= s.maxDepth {
			s.steps(n.While.Steps, p.child("steps"), depth+1, names)
		}
	}
}

func (s *validation) stepCommon(c *StepCommon, p *loc) {
	s.referenceID(c.ID, p.child("id"), "step id")
	s.maxLen(c.Name, MaxNameLength, p.child("name"))
	s.maxLen(c.Description, MaxDescriptionLength, p.child("description"))
	if c.FailureMode != "" && !c.FailureMode.Valid() {
		s.reportf(p.child("failure_mode"), "unknown failure mode %q; expected one of FAIL_AFTER_RUNNING, FAIL_IMMEDIATELY, IGNORE_FAILURE", c.FailureMode)
	}
	s.tags(c.Tags, p.child("tags"))
	s.timeout(c.Timeout, p.child("timeout"))
	if t := c.Transition; t != nil {
		tp := p.child("transition")
		succ := tp.child("successors")
		for to, cond := range t.Successors {
			s.expr(cond, succ.child(to), "condition")
		}
		if len(t.Predecessors) > 0 {
			seen := make(map[string]bool, len(t.Predecessors))
			for i, id := range t.Predecessors {
				if seen[id] {
					s.reportf(tp.child("predecessors").at(i), "duplicate predecessor %q", id)
				}
				seen[id] = true
			}
		}
	}
	s.signalDependencies(c.SignalDependencies, p.child("signal_dependencies"))
	s.signalOutputs(c.SignalOutputs, p.child("signal_outputs"))
	s.params(c.Params, p.child("params"), true)
}

func (s *validation) typedStep(st *Step, p *loc) {
	lower := string(st.Type)
	if !s.types[lower] {
		lower = strings.ToLower(lower)
	}
	switch {
	case st.Type == "":
		s.report(p.child("type"), "step type is required")
	case !s.types[lower] && unbuiltStepType(lower) != "":
		s.reportf(p.child("type"), "step type %q is a Maestro step type this deployment does not run: %s; supported: %s",
			st.Type, unbuiltStepType(lower), s.typeNames)
	case !s.types[lower]:
		s.reportf(p.child("type"), "unsupported step type %q; supported: %s", st.Type, s.typeNames)
	}
	ps, known := s.inheritedParams(st, p)
	if tp, ok := stepTypeSpec(st.Type); ok && tp.JobParam != "" && s.types[lower] && known {
		s.stepTypeParam(st, ps, tp, p.child("params").child(tp.JobParam))
	}
	s.retryPolicy(st.RetryPolicy, p.child("retry_policy"))
	if len(st.Config) == 0 {
		return
	}
	fields, ok := s.config[string(st.Type)]
	if !ok {
		fields = s.config[strings.ToLower(string(st.Type))]
	}
	for k, raw := range st.Config {
		check, ok := fields[k]
		if !ok {
			s.reportf(p.child(k), "unknown field for step type %q", st.Type)
			continue
		}
		if check != nil {
			if err := check(raw); err != nil {
				s.report(p.child(k), err.Error())
			}
		}
	}
}

// inheritedParams returns the step's params merged over those of its job
// template (Validator.JobTemplateParams), as a run merges them; known is
// false when the template's version is computed at run time, so what the
// step inherits is not known at push.
func (s *validation) inheritedParams(st *Step, p *loc) (ps Params, known bool) {
	if st.SubType == "" || s.templates == nil {
		return st.Params, true
	}
	if s.templateVersionUnknown {
		return st.Params, false
	}
	version := s.templateVersion
	if version == "" {
		version = "default"
	}
	inherited, err := s.templates(string(st.Type), st.SubType, version)
	if err != nil {
		s.report(p.child("sub_type"), err.Error())
		return st.Params, true
	}
	if len(inherited) == 0 {
		return st.Params, true
	}
	return MergeParams(inherited, st.Params), true
}

// stepTypeParam checks that a typed step has its job's MAP param and, when
// the MAP is literal, the fields it requires (an expression is checked when
// it runs).
func (s *validation) stepTypeParam(st *Step, ps Params, tp StepTypeSpec, at *loc) {
	name, required := tp.JobParam, tp.JobFields
	prm, ok := ps[name]
	switch {
	case !ok:
		s.reportf(at, "a %s step needs the %s param, a MAP with %s", st.Type, name, strings.Join(required, ", "))
		return
	case prm.Type == ParamTypeStringMap && tp.JobParamStringMap:
		if prm.Expression != nil {
			return
		}
		var keys []string
		switch m := prm.Value.(type) {
		case map[string]string:
			keys = slices.Collect(maps.Keys(m))
		case map[string]any:
			keys = slices.Collect(maps.Keys(m))
		default:
			return
		}
		for _, f := range required {
			if !slices.Contains(keys, f) {
				s.reportf(at.child("value"), "%s.%s is required", name, f)
			}
		}
		return
	case prm.Type != ParamTypeMap:
		s.reportf(at.child("type"), "must be MAP, got %q", prm.Type)
		return
	}
	m, literal := prm.MapValue()
	if !literal {
		return
	}
	for _, f := range required {
		if _, ok := m[f]; !ok {
			s.reportf(at.child("value"), "%s.%s is required", name, f)
		}
	}
}

func (s *validation) subworkflow(sw *Subworkflow, p *loc) {
	pp := p.child("params")
	id, ok := sw.Params[ParamSubworkflowID]
	if !ok {
		s.reportf(pp, "the %s parameter is required", ParamSubworkflowID)
	} else if id.Type != ParamTypeString {
		s.reportf(pp.child(ParamSubworkflowID).child("type"), "must be STRING, got %q", id.Type)
	}
	if ver, ok := sw.Params[ParamSubworkflowVersion]; ok && ver.Type != ParamTypeString {
		s.reportf(pp.child(ParamSubworkflowVersion).child("type"), "must be STRING, got %q", ver.Type)
	}
}

// loopParams checks the loop_params parameter of a foreach (required) or while (optional) step
// and returns the loop parameter names in scope for the nested steps.
func (s *validation) loopParams(params Params, p *loc, foreach bool, outer map[string]bool) map[string]bool {
	pp := p.child("params").child(ParamLoopParams)
	lp, ok := params[ParamLoopParams]
	if !ok {
		if foreach {
			s.reportf(p.child("params"), "the %s parameter is required for a foreach step", ParamLoopParams)
		}
		return outer
	}
	if lp.Type != ParamTypeMap {
		s.reportf(pp.child("type"), "must be MAP, got %q", lp.Type)
		return outer
	}
	entries, ok := lp.MapValue()
	if !ok {
		return outer
	}
	names := make(map[string]bool, len(outer)+len(entries))
	for k := range outer {
		names[k] = true
	}
	for name, e := range entries {
		ep := pp.child("value").child(name)
		if foreach && e.Type.Valid() && !e.Type.IsArray() {
			s.reportf(ep.child("type"), "a foreach loop parameter must have an array type, got %s", e.Type)
		}
		if outer[name] {
			s.reportf(ep, "loop parameter %q is already defined by an enclosing loop", name)
		}
		names[name] = true
	}
	return names
}

// expr checks that a SEL expression is present and, with a hook, that it parses.
func (s *validation) expr(expr string, at *loc, what string) {
	if strings.TrimSpace(expr) == "" {
		s.reportf(at, "%s must not be empty", what)
		return
	}
	if s.check == nil {
		return
	}
	err, seen := s.exprCache[expr]
	if !seen {
		err = s.check(expr)
		s.exprCache[expr] = err
	}
	if err != nil {
		s.report(at, "invalid SEL expression: "+err.Error())
	}
}

func (s *validation) maxLen(v string, limit int, at *loc) {
	if len(v) <= limit {
		return
	}
	if n := utf8.RuneCountInString(v); n > limit {
		s.reportf(at, "is %d characters long, more than the limit of %d", n, limit)
	}
}

// checkDurationConfig accepts a non-negative number of seconds (fractions allowed), a duration
// string or a parameter reference.
func checkDurationConfig(raw json.RawMessage) error {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if strings.Contains(text, "$") {
			return nil
		}
		d, err := ParseDuration(text)
		if err != nil {
			return err
		}
		return CheckSleepSeconds(d.Seconds())
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil {
		return fmt.Errorf("expected a number of seconds or a duration string")
	}
	return CheckSleepSeconds(secs)
}

// CheckSleepSeconds bounds a Sleep step's sleep_seconds: from 0 to
// MaxSleepSeconds (a larger one overflowed into a sleep that ended at
// once). The Sleep runtime checks a value that came from params again.
func CheckSleepSeconds(secs float64) error {
	if secs < 0 || secs > MaxSleepSeconds || secs != secs {
		return fmt.Errorf("must be between 0 and %d seconds (120 days), got %v", MaxSleepSeconds, secs)
	}
	return nil
}
