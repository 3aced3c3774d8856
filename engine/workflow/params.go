package workflow

import (
	"encoding/json"
	"slices"
)

// Param is a parameter definition: a typed literal value or a SEL expression evaluated at run
// time. Exactly one of Value and Expression is set.
//
// Value holds plain JSON values: string, json.Number, bool, []any, map[string]any (STRING_MAP),
// except for MAP parameters, whose value is a map[string]Param of nested definitions.
type Param struct {
	Value        any       `json:"value,omitzero" wf:"skip"`
	Expression   *string   `json:"expression,omitzero"`
	Type         ParamType `json:"type"`
	Validator    string    `json:"validator,omitzero"`
	Tags         Tags      `json:"tags,omitzero"`
	Mode         ParamMode `json:"mode,omitzero"`
	Source       string    `json:"source,omitzero"`        // set by Maestro after merging
	InternalMode string    `json:"internal_mode,omitzero"` // set by Maestro after merging
}

// Params maps parameter names to definitions.
type Params = map[string]Param

// LiteralParam returns a parameter with a literal value.
func LiteralParam(t ParamType, value any) Param { return Param{Type: t, Value: value} }

// ExpressionParam returns a parameter computed by a SEL expression.
func ExpressionParam(t ParamType, expr string) Param { return Param{Type: t, Expression: &expr} }

// IsLiteral reports whether the parameter has a literal value rather than an expression.
func (p Param) IsLiteral() bool { return p.Value != nil }

// EffectiveMode returns the mode, or DefaultParamMode when unset.
func (p Param) EffectiveMode() ParamMode {
	if p.Mode == "" {
		return DefaultParamMode
	}
	return p.Mode
}

// MapValue returns the nested definitions of a MAP parameter with a literal value.
func (p Param) MapValue() (map[string]Param, bool) {
	m, ok := p.Value.(map[string]Param)
	return m, ok
}

// UnmarshalJSON decodes strictly.
func (p *Param) UnmarshalJSON(data []byte) error { return decodeStrict(data, p, "") }

// postBind decodes the value according to the declared type: nested definitions for MAP.
func (p *Param) postBind(b *binder, n *node, path string) {
	v := n.get("value")
	if v == nil || v.kind == kindNull {
		return
	}
	if p.Type == ParamTypeMap && v.kind == kindObject {
		m := make(map[string]Param, len(v.keys))
		for i, k := range v.keys {
			var child Param
			b.bindInto(v.vals[i], &child, joinKey(joinKey(path, "value"), k))
			m[k] = child
		}
		p.Value = m
		return
	}
	p.Value = v.toAny()
}

var _ json.Unmarshaler = (*Param)(nil)

// MergeParams returns base with over merged in as Maestro merges params
// (ParamsMergeHelper.mergeParams): a param of over replaces base's of the
// same name (keeping what Inherit keeps of it), except that a literal MAP
// merges its members into base's literal MAP (recursively) and a literal
// STRING_MAP its entries into base's, over's winning. Neither argument is
// changed.
func MergeParams(base, over Params) Params {
	out := make(Params, len(base)+len(over))
	for k, p := range base {
		out[k] = p
	}
	for name, p := range over {
		b, ok := out[name]
		switch {
		case ok && p.Type == ParamTypeMap && b.Type == ParamTypeMap:
			bm, bLit := b.MapValue()
			pm, pLit := p.MapValue()
			if bLit && pLit {
				p.Value = MergeParams(bm, pm)
			}
		case ok && p.Type == ParamTypeStringMap && b.Type == ParamTypeStringMap:
			bm, bLit := stringMapValue(b.Value)
			pm, pLit := stringMapValue(p.Value)
			if bLit && pLit {
				m := make(map[string]any, len(bm)+len(pm))
				for k, v := range bm {
					m[k] = v
				}
				for k, v := range pm {
					m[k] = v
				}
				p.Value = m
			}
		}
		if ok {
			p = p.Inherit(b)
		}
		out[name] = p
	}
	return out
}

// Inherit returns p, a param given over base of the same name (a run
// param over the definition's, a step's over its template's), as Maestro
// merges one definition onto another: the mode and the validator p leaves
// unset are base's, and base's tags stay beside p's (p's win on a name).
// A run param that only sets a value is then still checked by the
// definition's validator.
func (p Param) Inherit(base Param) Param {
	if p.Mode == "" {
		p.Mode = base.Mode
	}
	if p.Validator == "" {
		p.Validator = base.Validator
	}
	if len(base.Tags) > 0 {
		tags := make(Tags, 0, len(base.Tags)+len(p.Tags))
		for _, t := range base.Tags {
			if !slices.ContainsFunc(p.Tags, func(o Tag) bool { return o.Name == t.Name }) {
				tags = append(tags, t)
			}
		}
		p.Tags = append(tags, p.Tags...)
	}
	return p
}

// stringMapValue reads a literal STRING_MAP value in either decoded form.
func stringMapValue(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[string]string:
		out := make(map[string]any, len(m))
		for k, s := range m {
			out[k] = s
		}
		return out, true
	}
	return nil, false
}

// JobTemplateVersionParam is the workflow param naming the version of the
// job templates its steps inherit from (Maestro's job_template_version);
// "default" when the workflow has none.
const JobTemplateVersionParam = "job_template_version"
