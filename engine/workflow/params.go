package workflow

import (
	"encoding/json"
	"maps"
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
// (ParamsMergeHelper.mergeParams): each param of over is merged onto
// base's of the same name (MergeParam). Neither argument is changed.
func MergeParams(base, over Params) Params {
	out := make(Params, len(base)+len(over))
	for k, p := range base {
		out[k] = p
	}
	for name, p := range over {
		if b, ok := out[name]; ok {
			p = MergeParam(b, p)
		}
		out[name] = p
	}
	return out
}

// MergeParam returns over, a param given over base of the same name (a run
// param over the definition's, a step's over its template's), as Maestro
// merges one definition onto another (buildMergedParamDefinition):
//
//   - over's value replaces base's, except that a literal MAP merges its
//     members into base's literal MAP (recursively) and a literal
//     STRING_MAP its entries into base's, over's winning;
//   - the mode and the validator over leaves unset are base's, so that a
//     run param that only gives a value is still checked by the
//     definition's validator;
//   - base's tags stay beside over's (over's win on a name).
//
// Neither argument is changed.
func MergeParam(base, over Param) Param {
	switch {
	case over.Type == ParamTypeMap && base.Type == ParamTypeMap:
		bm, bLit := base.MapValue()
		pm, pLit := over.MapValue()
		if bLit && pLit {
			over.Value = MergeParams(bm, pm)
		}
	case over.Type == ParamTypeStringMap && base.Type == ParamTypeStringMap:
		bm, bLit := stringMapValue(base.Value)
		pm, pLit := stringMapValue(over.Value)
		if bLit && pLit {
			m := make(map[string]any, len(bm)+len(pm))
			maps.Copy(m, bm)
			maps.Copy(m, pm)
			over.Value = m
		}
	}
	if over.Mode == "" {
		over.Mode = base.Mode
	}
	if over.Validator == "" {
		over.Validator = base.Validator
	}
	if len(base.Tags) > 0 {
		tags := make(Tags, 0, len(base.Tags)+len(over.Tags))
		for _, t := range base.Tags {
			if !slices.ContainsFunc(over.Tags, func(o Tag) bool { return o.Name == t.Name }) {
				tags = append(tags, t)
			}
		}
		over.Tags = append(tags, over.Tags...)
	}
	return over
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
