package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
)

// reservedParamNames may not be used as parameter names; Maestro keeps them for itself.
var reservedParamNames = map[string]bool{
	"maestro": true, "Maestro": true, "MAESTRO": true,
	"scheduler": true, "Scheduler": true, "SCHEDULER": true,
	"util": true, "Util": true, "UTIL": true,
	"params": true, "Params": true, "PARAMS": true,
	"AUTH_BLOB": true, "AUTH_DATA": true, "AUTH_ACTING_ON_BEHALF_OF_BLOB": true,
	"AUTH_TRIGGERING_ON_BEHALF_OF_BLOB": true, "AUTHORIZED_MANAGERS": true,
	// Set by the engine for every run and step (engine/params).
	"workflow_id": true, "workflow_instance_id": true, "workflow_run_id": true,
	"step_id": true, "step_instance_uuid": true, "step_attempt_id": true, "owner": true,
}

// workflowID checks a workflow id: [_a-zA-Z0-9][.\-_a-zA-Z0-9]*, at most 128 characters, no
// reserved prefix or suffix.
func (s *validation) workflowID(id string, at *loc) {
	switch {
	case id == "":
		s.report(at, "workflow id is required")
		return
	case len(id) > MaxIDLength:
		s.reportf(at, "id is %d characters long, more than the limit of %d", len(id), MaxIDLength)
		return
	case !idChars(id, false):
		s.reportf(at, "id %q may contain only letters, digits, '.', '-' and '_', and must not start with '.' or '-'", id)
		return
	}
	s.reserved(id, at, true)
}

// referenceID checks a step id or parameter name: [_a-zA-Z][.\-_a-zA-Z0-9]*, at most 128
// characters, no "__", no reserved prefix.
func (s *validation) referenceID(id string, at *loc, what string) bool {
	switch {
	case id == "":
		s.reportf(at, "%s is required", what)
	case len(id) > MaxIDLength:
		s.reportf(at, "%s is %d characters long, more than the limit of %d", what, len(id), MaxIDLength)
	case !idChars(id, true):
		s.reportf(at, "%s %q must start with a letter or '_' and contain only letters, digits, '.', '-' and '_'", what, id)
	case strings.Contains(id, "__"):
		s.reportf(at, "%s %q must not contain '__'", what, id)
	default:
		return s.reserved(id, at, false)
	}
	return false
}

func (s *validation) reserved(id string, at *loc, suffix bool) bool {
	lower := strings.ToLower(id)
	if strings.HasPrefix(lower, ReservedPrefix) {
		s.reportf(at, "%q must not start with the reserved prefix %q", id, ReservedPrefix)
		return false
	}
	if suffix && strings.HasSuffix(lower, ReservedSuffix) {
		s.reportf(at, "%q must not end with the reserved suffix %q", id, ReservedSuffix)
		return false
	}
	return true
}

// idChars checks the id character set; reference ids must not start with a digit.
func idChars(id string, reference bool) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case isDigit(c):
			if i == 0 && reference {
				return false
			}
		case c == '.' || c == '-':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (s *validation) tags(ts Tags, at *loc) {
	var seen map[string]bool
	for i, t := range ts {
		tp := at.at(i)
		if strings.TrimSpace(t.Name) == "" {
			s.report(tp.child("name"), "tag name is required")
			continue
		}
		s.maxLen(t.Name, MaxNameLength, tp.child("name"))
		if t.Namespace != "" && !t.Namespace.Valid() {
			s.reportf(tp.child("namespace"), "unknown tag namespace %q", t.Namespace)
		}
		if seen == nil {
			seen = make(map[string]bool, len(ts))
		}
		if seen[t.Name] {
			s.reportf(tp.child("name"), "duplicate tag name %q", t.Name)
		}
		seen[t.Name] = true
		if t.Permit != nil && (*t.Permit < 0 || *t.Permit > MaxTagPermit) {
			s.reportf(tp.child("permit"), "must be between 0 and %d, got %d", MaxTagPermit, *t.Permit)
		}
	}
}

// timeout checks a timeout or delay: positive and at most 120 days unless it refers to params.
func (s *validation) timeout(d *Duration, at *loc) {
	if d == nil || d.HasParams() {
		return
	}
	v, err := d.Resolve()
	if err != nil {
		s.report(at, err.Error())
		return
	}
	if v <= 0 || v > MaxTimeoutSeconds*time.Second {
		s.reportf(at, "must be positive and at most 120 days, got %s", durationText(d))
	}
}

func durationText(d *Duration) string {
	if d.IsText() {
		return fmt.Sprintf("%q", d.Text)
	}
	return fmt.Sprintf("%d seconds", d.Seconds)
}

// long checks a ParsableLong against a range unless it refers to params.
func (s *validation) long(v *ParsableLong, lo, hi int64, at *loc) {
	if v == nil || v.HasParams() {
		return
	}
	n, err := v.Resolve()
	if err != nil {
		s.report(at, "must be an integer or a parameter reference: "+err.Error())
		return
	}
	s.inRange(n, lo, hi, at)
}

// seconds checks a number of seconds (or a duration) against a range
// unless it refers to params.
func (s *validation) seconds(v *ParsableLong, lo, hi int64, at *loc) {
	if v == nil || v.HasParams() {
		return
	}
	n, err := v.ResolveSeconds()
	if err != nil {
		s.report(at, "must be a number of seconds, a duration or a parameter reference: "+err.Error())
		return
	}
	s.inRange(n, lo, hi, at)
}

func (s *validation) inRange(n, lo, hi int64, at *loc) {
	if n < lo || n > hi {
		s.reportf(at, "must be between %d and %d, got %d", lo, hi, n)
	}
}

func (s *validation) retryPolicy(rp *RetryPolicy, at *loc) {
	if rp == nil {
		return
	}
	s.long(rp.ErrorRetryLimit, 0, MaxRetryLimit, at.child("error_retry_limit"))
	s.long(rp.PlatformRetryLimit, 0, MaxRetryLimit, at.child("platform_retry_limit"))
	s.long(rp.TimeoutRetryLimit, 0, MaxRetryLimit, at.child("timeout_retry_limit"))
	b := rp.Backoff
	if b == nil {
		return
	}
	bp := at.child("backoff")
	switch {
	case b.Type == "":
		s.report(bp.child("type"), "backoff type is required: FIXED_BACKOFF or EXPONENTIAL_BACKOFF")
	case !b.Type.Valid():
		s.reportf(bp.child("type"), "unknown backoff type %q; expected FIXED_BACKOFF or EXPONENTIAL_BACKOFF", b.Type)
	}
	secs := []struct {
		v    *ParsableLong
		name string
	}{
		{b.ErrorRetryBackoffInSecs, "error_retry_backoff_in_secs"},
		{b.PlatformRetryBackoffInSecs, "platform_retry_backoff_in_secs"},
		{b.TimeoutRetryBackoffInSecs, "timeout_retry_backoff_in_secs"},
		{b.ErrorRetryLimitInSecs, "error_retry_limit_in_secs"},
		{b.PlatformRetryLimitInSecs, "platform_retry_limit_in_secs"},
		{b.TimeoutRetryLimitInSecs, "timeout_retry_limit_in_secs"},
	}
	for _, f := range secs {
		s.seconds(f.v, 0, MaxRetryBackoffSeconds, bp.child(f.name))
	}
	exps := []struct {
		v    *ParsableLong
		name string
	}{
		{b.ErrorRetryExponent, "error_retry_exponent"},
		{b.PlatformRetryExponent, "platform_retry_exponent"},
		{b.TimeoutRetryExponent, "timeout_retry_exponent"},
	}
	for _, f := range exps {
		s.long(f.v, 0, math.MaxInt32, bp.child(f.name))
	}
	if b.Type == BackoffFixed {
		for _, f := range append(secs[3:], exps...) {
			if f.v != nil {
				s.reportf(bp.child(f.name), "not allowed for %s", BackoffFixed)
			}
		}
	}
}

// timeTriggers checks each time trigger as the scheduler will read it
// (engine/trigger/schedule): the fields its type allows, its time zone, and its
// schedule, whose problems name the trigger's field and, within a cron
// expression, the cron field.
func (s *validation) timeTriggers(ts []TimeTrigger, at *loc) {
	for i := range ts {
		t := &ts[i]
		tp := at.at(i)
		before := len(s.list)
		typ := t.EffectiveType()
		notAllowed := func(set bool, field string) {
			if set {
				s.reportf(tp.child(field), "not allowed for %s triggers", typ)
			}
		}
		switch typ {
		case "":
			s.report(tp.child("type"), "trigger type is required: CRON, INTERVAL or PREDEFINED")
		case TimeTriggerCron:
			if strings.TrimSpace(t.Cron) == "" {
				s.report(tp.child("cron"), "cron expression is required")
			}
			notAllowed(t.Expression != "", "expression")
			notAllowed(t.Interval != "", "interval")
			notAllowed(t.Start != "", "start")
		case TimeTriggerPredefined:
			if t.Expression == "" {
				s.report(tp.child("expression"), "expression is required: @hourly, @daily, @weekly, @monthly or @yearly")
			}
			notAllowed(t.Cron != "", "cron")
			notAllowed(t.Interval != "", "interval")
			notAllowed(t.Start != "", "start")
		case TimeTriggerInterval:
			if t.Interval == "" {
				s.report(tp.child("interval"), "interval is required")
			} else if d, err := ParseDuration(t.Interval); err != nil {
				s.report(tp.child("interval"), err.Error())
			} else if d > MaxIntervalDays*24*time.Hour {
				s.reportf(tp.child("interval"), "must be at most %d days, got %q", MaxIntervalDays, t.Interval)
			}
			notAllowed(t.Cron != "", "cron")
			notAllowed(t.Expression != "", "expression")
			notAllowed(t.Timezone != "", "timezone")
		default:
			s.reportf(tp.child("type"), "unknown trigger type %q; expected CRON, INTERVAL or PREDEFINED", t.Type)
		}
		st := t.ScheduleTrigger()
		if t.Timezone != "" && typ != TimeTriggerInterval {
			if _, err := time.LoadLocation(t.Timezone); err != nil || strings.EqualFold(t.Timezone, "local") {
				s.reportf(tp.child("timezone"), "unknown time zone %q", t.Timezone)
				st.Timezone = "" // still check the schedule
			}
		}
		if t.FuzzyMaxDelay != nil && t.FuzzyMaxDelay.HasParams() {
			s.report(tp.child("fuzzy_max_delay"), "cannot refer to params: the delay is fixed when the trigger is scheduled")
		}
		s.timeout(t.FuzzyMaxDelay, tp.child("fuzzy_max_delay"))
		if len(s.list) > before && typ != TimeTriggerCron && typ != TimeTriggerPredefined {
			continue // the schedule cannot be read
		}
		if _, err := schedule.Compile(st); err != nil {
			s.scheduleProblem(t, tp, err)
		}
	}
}

// scheduleProblem reports what engine/trigger/schedule refused at the field it
// names.
func (s *validation) scheduleProblem(t *TimeTrigger, tp *loc, err error) {
	var fe *schedule.FieldError
	if !errors.As(err, &fe) {
		s.report(tp, err.Error())
		return
	}
	if fe.Field == "" || fe.Field == "timezone" || fe.Field == "type" {
		return // reported above
	}
	msg := fe.Msg
	switch {
	case fe.Field == "cron" && fe.Part != "":
		msg = fmt.Sprintf("invalid cron expression %q: %s", t.Cron, fe.Error())
	case fe.Field == "cron" && !strings.HasPrefix(fe.Msg, "fires more often"):
		if strings.TrimSpace(t.Cron) == "" {
			return // reported above
		}
		msg = fmt.Sprintf("invalid cron expression %q: %s", t.Cron, fe.Msg)
	case fe.Field == "expression" && t.Expression == "":
		return // reported above
	}
	for _, p := range s.list {
		if p.Path == tp.child(fe.Field).String() && p.Message == msg {
			return
		}
	}
	s.report(tp.child(fe.Field), msg)
}

func (s *validation) signalTriggers(ts []SignalTrigger, at *loc) {
	seen := make(map[string]int, len(ts))
	for i := range ts {
		t := &ts[i]
		tp := at.at(i)
		dp := tp.child("definitions")
		if len(t.Definitions) == 0 {
			s.report(dp, "at least one signal definition is required")
		}
		joinLen := -1
		for _, name := range sortedKeys(t.Definitions) {
			e := t.Definitions[name]
			ep := dp.child(name)
			if strings.TrimSpace(name) == "" {
				s.report(ep, "signal name must not be empty")
			}
			for k, m := range e.MatchParams {
				mp := ep.child("match_params").child(k)
				s.signalValue(m.Value, mp.child("value"))
				s.operator(m.Operator, mp.child("operator"))
			}
			seen := map[string]bool{}
			for j, key := range e.JoinKeys {
				kp := ep.child("join_keys").at(j)
				switch {
				case strings.TrimSpace(key) == "":
					s.report(kp, "join key must not be empty")
				case seen[key]:
					s.reportf(kp, "duplicate join key %q", key)
				}
				if _, ok := e.MatchParams[key]; ok {
					s.reportf(kp, "join key %q cannot also be in match_params", key)
				}
				seen[key] = true
			}
			if joinLen >= 0 && joinLen != len(e.JoinKeys) {
				s.report(ep.child("join_keys"), "join_keys must have the same length in every signal definition of a trigger")
			}
			joinLen = len(e.JoinKeys)
		}
		if t.Condition != "" {
			s.expr(t.Condition, tp.child("condition"), "condition")
		}
		if t.DedupExpr != "" {
			s.expr(t.DedupExpr, tp.child("dedup_expr"), "dedup_expr")
		}
		s.params(t.Params, tp.child("params"), true)
		if t.Incremental {
			s.incrementalTrigger(t, tp)
		}
		if key, err := json.Marshal(t); err == nil {
			if j, dup := seen[string(key)]; dup {
				s.reportf(tp, "repeats signal_triggers[%d]: a trigger would start every run twice", j)
			} else {
				seen[string(key)] = i
			}
		}
	}
}

// incrementalTrigger checks what an incremental signal trigger may hold:
// exactly one signal definition (the table change), no join keys (there
// is nothing to join), no dedup_expr and no params (the watermark decides
// what a run covers and which run a change starts; docs/incremental.md).
func (s *validation) incrementalTrigger(t *SignalTrigger, tp *loc) {
	if n := len(t.Definitions); n != 1 {
		s.reportf(tp.child("definitions"), "an incremental trigger needs exactly one signal definition (the table change), got %d", n)
	}
	for _, name := range sortedKeys(t.Definitions) {
		if len(t.Definitions[name].JoinKeys) > 0 {
			s.report(tp.child("definitions").child(name).child("join_keys"), "an incremental trigger has no join_keys")
		}
	}
	if t.DedupExpr != "" {
		s.report(tp.child("dedup_expr"), "an incremental trigger has no dedup_expr: the watermark starts one run per range")
	}
	if len(t.Params) > 0 {
		s.report(tp.child("params"), "an incremental trigger has no params: its runs get the range params (from_snapshot_id, to_snapshot_id, ...)")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (s *validation) signalValue(v any, at *loc) {
	switch x := v.(type) {
	case nil:
		s.report(at, "value is required")
	case string:
	default:
		if !isInteger(x) {
			s.reportf(at, "expected a string or an integer, got %s", describeValue(v))
		}
	}
}

func (s *validation) operator(op SignalOperator, at *loc) {
	switch {
	case op == "":
		s.report(at, "operator is required: =, >, >=, < or <=")
	case !op.Valid():
		s.reportf(at, "unknown operator %q; expected =, >, >=, < or <=", op)
	}
}

func (s *validation) signalDependencies(deps []SignalDependency, at *loc) {
	for i := range deps {
		d := &deps[i]
		dp := at.at(i)
		if strings.TrimSpace(d.Name) == "" {
			s.report(dp.child("name"), "signal name is required")
		}
		for _, k := range sortedKeys(d.MatchParams) {
			m := d.MatchParams[k]
			mp := dp.child("match_params").child(k)
			s.param(&m.Param, mp.child("param"))
			if m.Param.Type != "" && m.Param.Type != ParamTypeString && m.Param.Type != ParamTypeLong {
				s.reportf(mp.child("param").child("type"), "must be STRING or LONG, got %s", m.Param.Type)
			}
			s.operator(m.Operator, mp.child("operator"))
		}
	}
}

func (s *validation) signalOutputs(outs []SignalOutput, at *loc) {
	for i := range outs {
		o := &outs[i]
		op := at.at(i)
		if strings.TrimSpace(o.Name) == "" {
			s.report(op.child("name"), "signal name is required")
		}
		pp := op.child("params")
		for _, k := range sortedKeys(o.Params) {
			p := o.Params[k]
			kp := pp.child(k)
			if k == "name" {
				s.report(kp, `a signal output parameter cannot be called "name"`)
			}
			s.param(&p, kp)
			if p.Type != "" && p.Type != ParamTypeString && p.Type != ParamTypeLong {
				s.reportf(kp.child("type"), "must be STRING or LONG, got %s", p.Type)
			}
		}
		for _, k := range sortedKeys(o.Payload) {
			p := o.Payload[k]
			kp := op.child("payload").child(k)
			if _, dup := o.Params[k]; dup {
				s.reportf(kp, "payload key %q repeats a key of params", k)
			}
			s.param(&p, kp)
		}
	}
}

func (s *validation) properties(p *Properties, at *loc) {
	if p.Owner != nil && strings.TrimSpace(p.Owner.Name) == "" {
		op := at.child("owner")
		if p.Owner.object {
			op = op.child("name")
		}
		s.report(op, "owner name is required")
	}
	s.object(p.AccessControl, at.child("access_control"))
	s.operators(p.AccessControl, at.child("access_control").child("operators"))
	s.alerting(p.Alerting, at.child("alerting"))
	if r := p.RunStrategy; r != nil {
		rp := at.child("run_strategy")
		rulePath, concPath := rp, rp
		if r.form == runStrategyObject {
			rulePath, concPath = rp.child("rule"), rp.child("workflow_concurrency")
		}
		switch {
		case r.Rule == "":
			s.report(rulePath, "run strategy rule is required")
		case !r.Rule.Valid():
			s.reportf(rulePath, "unknown run strategy %q; expected one of SEQUENTIAL, STRICT_SEQUENTIAL, FIRST_ONLY, LAST_ONLY, PARALLEL", r.Rule)
		}
		if c := r.WorkflowConcurrency; c != nil {
			switch {
			case *c < 0 || *c > MaxWorkflowConcurrency:
				s.reportf(concPath, "workflow concurrency must be between 0 and %d, got %d", MaxWorkflowConcurrency, *c)
			case *c > 1 && r.Rule.Valid() && r.Rule != RunStrategyParallel:
				s.reportf(concPath, "only PARALLEL allows a workflow concurrency greater than 1, got %d for %s", *c, r.Rule)
			}
		}
	}
	if c := p.StepConcurrency; c != nil && (*c < 1 || *c > MaxStepConcurrency) {
		s.reportf(at.child("step_concurrency"), "must be between 1 and %d, got %d", MaxStepConcurrency, *c)
	}
	if d := p.RunRetentionDays; d != nil && (*d < 1 || *d > MaxRunRetentionDays) {
		s.reportf(at.child("run_retention_days"), "must be between 1 and %d days, got %d", MaxRunRetentionDays, *d)
	}
	if p.Description != nil {
		s.maxLen(*p.Description, MaxDescriptionLength, at.child("description"))
	}
	s.tags(p.Tags, at.child("tags"))
}

// object checks that an opaque block, when set, is a JSON object.
func (s *validation) object(raw []byte, at *loc) {
	if len(raw) == 0 {
		return
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		s.report(at, "expected an object")
	}
}

// operators checks access_control.operators, the principals who may act on
// the workflow's runs: a list of at most MaxOperators plausible names.
func (s *validation) operators(accessControl []byte, at *loc) {
	var ac map[string]json.RawMessage
	if len(accessControl) == 0 || json.Unmarshal(accessControl, &ac) != nil {
		return
	}
	raw, ok := ac["operators"]
	if !ok {
		return
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		s.report(at, "expected a list of principals (names or IAM ARNs)")
		return
	}
	if len(names) > MaxOperators {
		s.reportf(at, "at most %d operators, got %d", MaxOperators, len(names))
	}
	for i, n := range names {
		if strings.TrimSpace(n) == "" {
			s.report(at.at(i), "an operator is a non-empty name or IAM ARN")
		} else {
			s.maxLen(n, 2048, at.at(i))
		}
	}
}
