package workflow

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// Properties are the workflow settings kept across versions (owner, run strategy, concurrency,
// alerting, trigger switches). They are versioned by snapshots of their own: a properties
// document is a change set, and an unset (nil) field means "no change" (see Merge).
type Properties struct {
	Owner                 *Owner          `json:"owner,omitzero"`
	AccessControl         json.RawMessage `json:"access_control,omitzero"` // opaque object
	RunStrategy           *RunStrategy    `json:"run_strategy,omitzero"`
	StepConcurrency       *int64          `json:"step_concurrency,omitzero"`
	Alerting              json.RawMessage `json:"alerting,omitzero"` // opaque object
	AlertingDisabled      *bool           `json:"alerting_disabled,omitzero"`
	SignalTriggerDisabled *bool           `json:"signal_trigger_disabled,omitzero"`
	TimeTriggerDisabled   *bool           `json:"time_trigger_disabled,omitzero"`
	Description           *string         `json:"description,omitzero"`
	Tags                  Tags            `json:"tags,omitzero"`
	// RunRetentionDays is how many days the workflow's ended runs stay in
	// the database before the archiver moves them to the archive
	// (engine/retention); unset, the deployment's retention
	// (MAESTRO_RETENTION). Not a Netflix Maestro property: an extension.
	RunRetentionDays *int64 `json:"run_retention_days,omitzero"`
}

// Defaults and limits for properties, as in Maestro.
const (
	DefaultWorkflowConcurrency = 20    // PARALLEL without workflow_concurrency
	MaxWorkflowConcurrency     = 1000  // upper bound of workflow_concurrency
	DefaultStepConcurrency     = 20    // step_concurrency when unset
	MaxStepConcurrency         = 1000  // upper bound of step_concurrency
	MaxRunRetentionDays        = 36500 // upper bound of run_retention_days (100 years)
)

// MaxOperators bounds access_control.operators.
const MaxOperators = 100

// Operators reads the principals access_control.operators names from its
// JSON (a list of names or IAM ARNs); anything else names none. They may
// act on the workflow's runs as its owner may (docs/security.md).
func Operators(raw []byte) []string {
	var names []string
	if len(raw) == 0 || json.Unmarshal(raw, &names) != nil {
		return nil
	}
	out := names[:0]
	for _, n := range names {
		if strings.TrimSpace(n) != "" {
			out = append(out, n)
		}
	}
	return out
}

// Merge returns a new snapshot: the fields set in change over the ones in p. p may be nil.
func (p *Properties) Merge(change *Properties) *Properties {
	if p == nil {
		if change == nil {
			return nil
		}
		c := *change
		return &c
	}
	out := *p
	if change == nil {
		return &out
	}
	pick(&out.Owner, change.Owner)
	pickRaw(&out.AccessControl, change.AccessControl)
	pick(&out.RunStrategy, change.RunStrategy)
	pick(&out.StepConcurrency, change.StepConcurrency)
	pickRaw(&out.Alerting, change.Alerting)
	pick(&out.AlertingDisabled, change.AlertingDisabled)
	pick(&out.SignalTriggerDisabled, change.SignalTriggerDisabled)
	pick(&out.TimeTriggerDisabled, change.TimeTriggerDisabled)
	pick(&out.Description, change.Description)
	pick(&out.RunRetentionDays, change.RunRetentionDays)
	if change.Tags != nil {
		out.Tags = change.Tags
	}
	return &out
}

func pick[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

func pickRaw(dst *json.RawMessage, v json.RawMessage) {
	if v != nil {
		*dst = v
	}
}

// UnmarshalJSON decodes strictly; see DecodeProperties.
func (p *Properties) UnmarshalJSON(data []byte) error { return decodeStrict(data, p, "") }

// Owner is the workflow owner. In JSON it is a user name ("tester") or an object with a name and
// further details, which are kept as they are.
type Owner struct {
	Name   string                     `json:"name"`
	Extra  map[string]json.RawMessage `json:"-" wf:"extra"`
	object bool
}

// NewOwner returns an owner written as a bare name.
func NewOwner(name string) *Owner { return &Owner{Name: name} }

// MarshalJSON writes a bare name unless the owner was given as an object or has details.
func (o Owner) MarshalJSON() ([]byte, error) {
	if !o.object && len(o.Extra) == 0 {
		return appendJSONString(nil, o.Name), nil
	}
	type plain Owner
	return marshalWithExtra(plain(o), o.Extra)
}

func (o *Owner) bindNode(b *binder, n *node, path string) {
	switch n.kind {
	case kindString:
		*o = Owner{Name: n.text}
	case kindObject:
		type plain Owner
		var v plain
		b.bindStruct(n, reflectValueOf(&v), path)
		v.object = true
		*o = Owner(v)
	default:
		b.addf(path, "expected a user name or an owner object, got %s%s", n.kind, n.pos())
	}
}

// RunStrategy decides whether a new instance runs, queues or replaces a running one. In JSON it
// is a rule name ("sequential"), a number (PARALLEL with that concurrency), or an object
// {"rule": ..., "workflow_concurrency": ...}; it is written back in the form it was given.
type RunStrategy struct {
	Rule                RunStrategyRule `json:"rule"`
	WorkflowConcurrency *int64          `json:"workflow_concurrency,omitzero"` // 0 pauses the workflow
	form                runStrategyForm
}

type runStrategyForm uint8

const (
	runStrategyObject runStrategyForm = iota
	runStrategyName
	runStrategyNumber
)

// Concurrency returns the effective workflow concurrency: the configured one, or
// DefaultWorkflowConcurrency for PARALLEL and 1 for the other rules.
func (r RunStrategy) Concurrency() int64 {
	if r.WorkflowConcurrency != nil {
		return *r.WorkflowConcurrency
	}
	if r.Rule == RunStrategyParallel {
		return DefaultWorkflowConcurrency
	}
	return 1
}

// MarshalJSON writes the strategy in the form it was given.
func (r RunStrategy) MarshalJSON() ([]byte, error) {
	switch {
	case r.form == runStrategyName && r.WorkflowConcurrency == nil:
		return appendJSONString(nil, string(r.Rule)), nil
	case r.form == runStrategyNumber && r.WorkflowConcurrency != nil && r.Rule == RunStrategyParallel:
		return strconv.AppendInt(nil, *r.WorkflowConcurrency, 10), nil
	}
	type plain RunStrategy
	return marshalNoEscape(plain(r))
}

func (r *RunStrategy) bindNode(b *binder, n *node, path string) {
	switch n.kind {
	case kindString:
		*r = RunStrategy{Rule: RunStrategyRule(n.text), form: runStrategyName}
		r.Rule.normalize()
	case kindNumber:
		if i, ok := b.integer(n, path); ok {
			*r = RunStrategy{Rule: RunStrategyParallel, WorkflowConcurrency: &i, form: runStrategyNumber}
		}
	case kindObject:
		type plain RunStrategy
		var v plain
		b.bindStruct(n, reflectValueOf(&v), path)
		*r = RunStrategy(v)
	default:
		b.addf(path, "expected a rule name, a number or an object, got %s%s", n.kind, n.pos())
	}
}

// PropertiesChange is an update of a workflow's properties: the fields to
// set and, as Maestro's properties update request, fields to put back to
// their defaults (reset_run_strategy_rule, reset_workflow_concurrency,
// reset_step_concurrency), or one tag to add or remove (Maestro's
// properties/tag endpoints).
type PropertiesChange struct {
	// Set are the fields to set; unset fields are left as they are.
	Set *Properties
	// ResetRunStrategyRule puts the rule back to SEQUENTIAL (keeping a
	// workflow_concurrency that was set).
	ResetRunStrategyRule bool
	// ResetWorkflowConcurrency drops the run strategy's
	// workflow_concurrency (its rule's default applies again).
	ResetWorkflowConcurrency bool
	// ResetStepConcurrency drops step_concurrency (the default applies).
	ResetStepConcurrency bool
	// AddTag adds a tag to properties.tags, replacing one of its name.
	AddTag *Tag
	// RemoveTag removes the tag of this name from properties.tags.
	RemoveTag string
}

// ErrConflictingChange reports a properties change that sets and resets
// the same field.
var ErrConflictingChange = errors.New("setting and resetting the same workflow property in one request is not allowed")

// Check reports a change that sets and resets the same field.
func (c PropertiesChange) Check() error {
	if c.Set == nil {
		return nil
	}
	if (c.ResetStepConcurrency && c.Set.StepConcurrency != nil) ||
		((c.ResetRunStrategyRule || c.ResetWorkflowConcurrency) && c.Set.RunStrategy != nil) {
		return ErrConflictingChange
	}
	return nil
}

// Apply returns the properties p (which may be nil) with the change made.
func (c PropertiesChange) Apply(p *Properties) *Properties {
	out := p.Merge(c.Set)
	if out == nil {
		out = &Properties{}
	}
	if c.ResetStepConcurrency {
		out.StepConcurrency = nil
	}
	if rs := out.RunStrategy; rs != nil && (c.ResetRunStrategyRule || c.ResetWorkflowConcurrency) {
		reset := RunStrategy{Rule: rs.Rule, WorkflowConcurrency: rs.WorkflowConcurrency}
		if c.ResetRunStrategyRule {
			reset.Rule = RunStrategySequential
		}
		if c.ResetWorkflowConcurrency {
			reset.WorkflowConcurrency = nil
		}
		out.RunStrategy = &reset
		if reset.Rule == RunStrategySequential && reset.WorkflowConcurrency == nil {
			out.RunStrategy = nil
		}
	}
	if c.AddTag != nil || c.RemoveTag != "" {
		tags := make(Tags, 0, len(out.Tags)+1)
		for _, t := range out.Tags {
			if t.Name != c.RemoveTag && (c.AddTag == nil || t.Name != c.AddTag.Name) {
				tags = append(tags, t)
			}
		}
		if c.AddTag != nil {
			tags = append(tags, *c.AddTag)
		}
		out.Tags = tags
		if len(tags) == 0 {
			out.Tags = nil
		}
	}
	return out
}
