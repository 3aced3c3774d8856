// Package jobparam reads a step's job MAP param (`batch`, `emr`,
// `notebook`, ...) the way every AWS step runtime does: typed fields,
// unknown fields refused with the list of known ones, every problem
// collected into one error, so that a step's FATAL_ERROR message names all
// of them at once.
package jobparam

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Reader reads the fields of one MAP. Problems accumulate in Err.
type Reader struct {
	// Name is the map's path in messages ("batch", "emr.step").
	Name string
	m    map[string]any
	errs []error
}

// Open returns a reader of the MAP param name of a step's params, or an
// error naming the param and hint (what it must hold) when it is missing
// or not a map.
func Open(stepParams map[string]any, name, hint string) (*Reader, error) {
	switch m := stepParams[name].(type) {
	case map[string]any:
		return &Reader{Name: name, m: m}, nil
	case map[string]string:
		// A STRING_MAP (the YAML DSL's plain maps).
		am := make(map[string]any, len(m))
		for k, v := range m {
			am[k] = v
		}
		return &Reader{Name: name, m: am}, nil
	}
	return nil, fmt.Errorf("this step needs the %q param: a MAP with %s", name, hint)
}

// Sub returns a reader of the nested map field k (nil when absent).
func (r *Reader) Sub(k string) *Reader {
	v, ok := r.m[k]
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		r.errs = append(r.errs, fmt.Errorf("%s.%s: want a map, got %T", r.Name, k, v))
		return nil
	}
	return &Reader{Name: r.Name + "." + k, m: m}
}

// Known refuses fields not in fields.
func (r *Reader) Known(fields ...string) {
	var unknown []string
	for k := range r.m {
		if !slices.Contains(fields, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		r.errs = append(r.errs, fmt.Errorf("%s.%s: unknown field; the fields are %s", r.Name, k, strings.Join(fields, ", ")))
	}
}

// Others returns the fields not in fields, with their values.
func (r *Reader) Others(fields ...string) map[string]any {
	out := map[string]any{}
	for k, v := range r.m {
		if !slices.Contains(fields, k) {
			out[k] = v
		}
	}
	return out
}

// Has reports whether field k is set.
func (r *Reader) Has(k string) bool {
	_, ok := r.m[k]
	return ok
}

func (r *Reader) convert(k string, t workflow.ParamType) (any, bool) {
	v, ok := r.m[k]
	if !ok || v == nil {
		return nil, false
	}
	out, err := params.Convert(t, v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s.%s: %v", r.Name, k, err))
		return nil, false
	}
	return out, true
}

// String reads a string field (trimmed), def when absent.
func (r *Reader) String(k, def string) string {
	if v, ok := r.convert(k, workflow.ParamTypeString); ok {
		return strings.TrimSpace(v.(string))
	}
	return def
}

// Required reads a string field that must be set and non-empty.
func (r *Reader) Required(k string) string {
	s := r.String(k, "")
	if s == "" {
		r.errs = append(r.errs, fmt.Errorf("%s.%s is required", r.Name, k))
	}
	return s
}

// Strings reads a STRING_ARRAY field.
func (r *Reader) Strings(k string) []string {
	if v, ok := r.convert(k, workflow.ParamTypeStringArray); ok {
		return v.([]string)
	}
	return nil
}

// StringMap reads a STRING_MAP field.
func (r *Reader) StringMap(k string) map[string]string {
	if v, ok := r.convert(k, workflow.ParamTypeStringMap); ok {
		return v.(map[string]string)
	}
	return nil
}

// Long reads an integer field, def when absent.
func (r *Reader) Long(k string, def int64) int64 {
	if v, ok := r.convert(k, workflow.ParamTypeLong); ok {
		return v.(int64)
	}
	return def
}

// Bool reads a boolean field, def when absent.
func (r *Reader) Bool(k string, def bool) bool {
	if v, ok := r.convert(k, workflow.ParamTypeBoolean); ok {
		return v.(bool)
	}
	return def
}

// Duration reads a duration field ("30s", "5m", or a number of seconds),
// def when absent; shorter than min is an error.
func (r *Reader) Duration(k string, def, min time.Duration) time.Duration {
	v, ok := r.m[k]
	if !ok || v == nil {
		return def
	}
	var d time.Duration
	var err error
	switch x := v.(type) {
	case string:
		d, err = workflow.ParseDuration(x)
	case int64:
		d = time.Duration(x) * time.Second
	case int:
		d = time.Duration(x) * time.Second
	case float64:
		d = time.Duration(x * float64(time.Second))
	default:
		err = fmt.Errorf("want a duration, got %T", v)
	}
	if err == nil && d < min {
		err = fmt.Errorf("%s is shorter than %s", d, min)
	}
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s.%s: %v", r.Name, k, err))
		return def
	}
	return d
}

// Fail adds a problem of the caller's own.
func (r *Reader) Fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// Err is every problem found so far, joined, or nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Absorb adds the problems of a nested reader to r's.
func (r *Reader) Absorb(sub *Reader) {
	if sub != nil {
		r.errs = append(r.errs, sub.errs...)
		sub.errs = nil
	}
}
