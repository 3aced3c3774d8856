package awsjob

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Spec reads a step type's job MAP param (the `athena`, `glue`, ... param,
// evaluated: interpolation and SEL have run), collecting every error.
type Spec struct {
	param string
	m     map[string]any
	errs  []error
}

// ReadSpec reads the MAP param named param of the attempt, whose fields
// must be among fields (usage is appended to the message of a missing
// param).
func ReadSpec(a *stepruntime.Attempt, param string, fields []string, usage string) (*Spec, error) {
	m, ok := a.Params[param].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("this step needs the %q param: a MAP with %s", param, usage)
	}
	s := &Spec{param: param, m: m}
	for k := range m {
		if !slices.Contains(fields, k) {
			s.errs = append(s.errs, fmt.Errorf("%s.%s: unknown field; the fields are %s", param, k, strings.Join(fields, ", ")))
		}
	}
	return s, nil
}

// Has reports whether the field is set.
func (s *Spec) Has(k string) bool { _, ok := s.m[k]; return ok }

// String reads a STRING field, trimmed ("" when unset).
func (s *Spec) String(k string) string {
	v, ok := s.m[k]
	if !ok {
		return ""
	}
	out, err := params.Convert(workflow.ParamTypeString, v)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s.%s: %v", s.param, k, err))
		return ""
	}
	return strings.TrimSpace(out.(string))
}

// StringMap reads a STRING_MAP field (nil when unset).
func (s *Spec) StringMap(k string) map[string]string {
	v, ok := s.m[k]
	if !ok {
		return nil
	}
	out, err := params.Convert(workflow.ParamTypeStringMap, v)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s.%s: %v", s.param, k, err))
		return nil
	}
	return out.(map[string]string)
}

// Long reads a LONG field within [lo, hi] (def when unset).
func (s *Spec) Long(k string, def, lo, hi int64) int64 {
	v, ok := s.m[k]
	if !ok {
		return def
	}
	out, err := params.Convert(workflow.ParamTypeLong, v)
	if err == nil && (out.(int64) < lo || out.(int64) > hi) {
		err = fmt.Errorf("%d is not within [%d, %d]", out, lo, hi)
	}
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s.%s: %v", s.param, k, err))
		return def
	}
	return out.(int64)
}

// JSON reads a field holding JSON: a STRING of JSON text or a MAP (an
// object); def when unset.
func (s *Spec) JSON(k, def string) string {
	v, ok := s.m[k]
	if !ok {
		return def
	}
	if str, ok := v.(string); ok {
		str = strings.TrimSpace(str)
		if str == "" {
			return def
		}
		if !jsonValid(str) {
			s.errs = append(s.errs, fmt.Errorf("%s.%s: not valid JSON", s.param, k))
		}
		return str
	}
	b, err := jsonMarshal(v)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s.%s: %v", s.param, k, err))
		return def
	}
	return string(b)
}

// Require records an error when v (the field k's value) is empty.
func (s *Spec) Require(k, v string) {
	if v == "" {
		s.errs = append(s.errs, fmt.Errorf("%s.%s is required", s.param, k))
	}
}

// Err is every error met.
func (s *Spec) Err() error { return errors.Join(s.errs...) }

// Output is an output param of type t.
func Output(t workflow.ParamType, v any) params.Value { return params.Value{Type: t, Value: v} }

func jsonValid(s string) bool { return json.Valid([]byte(s)) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// ObjectOutputs turns a job's JSON result into output params when it is an
// object: each member one (a value no param type holds, such as an array
// of objects, as its JSON text). Anything else gives none.
func ObjectOutputs(payload string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.UseNumber()
	var obj map[string]any
	if dec.Decode(&obj) != nil {
		return nil
	}
	out := make(map[string]any, len(obj))
	for k, e := range obj {
		if e == nil {
			continue
		}
		if _, err := params.Infer(e); err != nil {
			b, _ := json.Marshal(e)
			e = params.Value{Type: workflow.ParamTypeString, Value: string(b)}
		}
		out[k] = e
	}
	return out
}
