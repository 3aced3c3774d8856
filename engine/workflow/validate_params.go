package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// params checks a parameter map. userDefined applies the naming rules for parameters a user
// declares (reserved names are refused).
func (s *validation) params(ps Params, at *loc, userDefined bool) {
	for name, p := range ps {
		pp := at.child(name)
		if s.referenceID(name, pp, "parameter name") && userDefined && reservedParamNames[name] {
			s.reportf(pp, "parameter name %q is reserved", name)
		}
		s.param(&p, pp)
	}
	if userDefined && s.checkPs != nil && len(ps) > 0 {
		if err := s.checkPs(ps); err != nil {
			s.report(at, err.Error())
		}
	}
}

// param checks one definition: type, mode, exactly one of value and expression, and that the
// value matches the type.
func (s *validation) param(p *Param, at *loc) {
	typeOK := false
	switch {
	case p.Type == "":
		s.report(at.child("type"), "parameter type is required")
	case !p.Type.Valid():
		s.reportf(at.child("type"), "unknown parameter type %q; expected one of STRING, LONG, DOUBLE, BOOLEAN, STRING_MAP, STRING_ARRAY, LONG_ARRAY, DOUBLE_ARRAY, BOOLEAN_ARRAY, MAP", p.Type)
	default:
		typeOK = true
	}
	if p.Mode != "" && !p.Mode.Valid() {
		s.reportf(at.child("mode"), "unknown parameter mode %q; expected one of CONSTANT, IMMUTABLE, MUTABLE, MUTABLE_ON_START, MUTABLE_ON_START_RESTART", p.Mode)
	}
	hasValue, hasExpr := p.Value != nil, p.Expression != nil
	switch {
	case hasValue && hasExpr:
		s.report(at, "exactly one of value or expression must be set, got both")
	case !hasValue && !hasExpr:
		s.report(at, "exactly one of value or expression must be set, got neither")
	case hasExpr:
		s.expr(*p.Expression, at.child("expression"), "expression")
	case typeOK:
		s.paramValue(p.Type, p.Value, at.child("value"))
	}
	s.tags(p.Tags, at.child("tags"))
}

// paramValue checks that a literal value matches its declared type.
func (s *validation) paramValue(t ParamType, v any, at *loc) {
	mismatch := func(at *loc, want string, got any) { s.mismatch(at, t, want, got) }
	switch t {
	case ParamTypeString:
		if _, ok := v.(string); !ok {
			mismatch(at, "a string", v)
		}
	case ParamTypeLong:
		if !isInteger(v) {
			mismatch(at, "an integer", v)
		}
	case ParamTypeDouble:
		if !isDouble(v) {
			mismatch(at, "a number", v)
		}
	case ParamTypeBoolean:
		if _, ok := v.(bool); !ok {
			mismatch(at, "a boolean", v)
		}
	case ParamTypeStringMap:
		switch m := v.(type) {
		case map[string]string:
		case map[string]any:
			for k, e := range m {
				if _, ok := e.(string); !ok {
					mismatch(at.child(k), "a string value", e)
				}
			}
		default:
			mismatch(at, "an object of strings", v)
		}
	case ParamTypeStringArray, ParamTypeLongArray, ParamTypeDoubleArray, ParamTypeBooleanArray:
		s.arrayValue(t, v, at)
	case ParamTypeMap:
		m, ok := v.(map[string]Param)
		if !ok {
			mismatch(at, "an object of parameter definitions", v)
			return
		}
		s.params(m, at, false)
	}
}

// mismatch reports a value that does not match its parameter type.
func (s *validation) mismatch(at *loc, t ParamType, want string, got any) {
	s.reportf(at, "expected %s for %s, got %s", want, t, describeValue(got))
}

func (s *validation) arrayValue(t ParamType, v any, at *loc) {
	mismatch := func(at *loc, want string, got any) { s.mismatch(at, t, want, got) }
	var elemOK func(any) bool
	var want string
	switch t.Elem() {
	case ParamTypeString:
		elemOK, want = func(e any) bool { _, ok := e.(string); return ok }, "a string"
	case ParamTypeLong:
		elemOK, want = isInteger, "an integer"
	case ParamTypeDouble:
		elemOK, want = isDouble, "a number"
	case ParamTypeBoolean:
		elemOK, want = func(e any) bool { _, ok := e.(bool); return ok }, "a boolean"
	}
	switch a := v.(type) {
	case []any:
		for i, e := range a {
			if !elemOK(e) {
				mismatch(at.at(i), want, e)
			}
		}
	case []string:
		if t != ParamTypeStringArray {
			mismatch(at, "an array", v)
		}
	case []int64, []int:
		if t != ParamTypeLongArray && t != ParamTypeDoubleArray {
			mismatch(at, "an array", v)
		}
	case []float64:
		if t != ParamTypeDoubleArray {
			mismatch(at, "an array", v)
		}
	case []bool:
		if t != ParamTypeBooleanArray {
			mismatch(at, "an array", v)
		}
	default:
		mismatch(at, "an array", v)
	}
}

// isInteger reports whether v is an integral number that fits in 64 bits.
func isInteger(v any) bool {
	switch x := v.(type) {
	case json.Number:
		_, err := strconv.ParseInt(string(x), 10, 64)
		return err == nil
	case int, int32, int64:
		return true
	case float64:
		return x == math.Trunc(x) && math.Abs(x) < 1<<63
	}
	return false
}

// isDouble reports whether v is a DOUBLE value: a finite number, or a
// string holding one, as Maestro writes a BigDecimal to keep its digits
// ("10.229999999999", its sample-wf-params.json).
func isDouble(v any) bool {
	if str, ok := v.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(str), 64)
		return err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	return isNumber(v)
}

// isNumber reports whether v is a finite number.
func isNumber(v any) bool {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return err == nil && !math.IsInf(f, 0)
	case int, int32, int64:
		return true
	case float64:
		return !math.IsInf(x, 0) && !math.IsNaN(x)
	}
	return false
}

// describeValue names a value's JSON type (with the value for scalars) for messages.
func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			x = x[:37] + "..."
		}
		return "string " + strconv.Quote(x)
	case json.Number:
		return "number " + string(x)
	case int, int32, int64, float64:
		return fmt.Sprintf("number %v", x)
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case []any, []string, []int64, []int, []float64, []bool:
		return "array"
	case map[string]any, map[string]string, map[string]Param:
		return "object"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", v), "workflow.")
}
