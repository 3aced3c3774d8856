package workflow

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// paramBlock converts a mapping of DSL parameters into into.
func (c *dslConverter) paramBlock(n *node, path string, into Params) {
	if n.kind == kindNull || !c.expect(n, kindObject, path) {
		return
	}
	for i, k := range n.keys {
		c.param(k, n.vals[i], joinKey(path, k), into)
	}
}

// paramKey is a DSL parameter key: "!name<type>(mode)".
type paramKey struct {
	name string
	expr bool
	typ  ParamType
	mode ParamMode
}

// dslTypeNames maps the DSL spellings of types that differ from the model's.
var dslTypeNames = map[string]ParamType{
	"MAP":            ParamTypeStringMap,
	"PMAP":           ParamTypeMap,
	"ARRAY<STRING>":  ParamTypeStringArray,
	"ARRAY<LONG>":    ParamTypeLongArray,
	"ARRAY<DOUBLE>":  ParamTypeDoubleArray,
	"ARRAY<BOOLEAN>": ParamTypeBooleanArray,
}

func parseParamKey(raw string) (paramKey, string) {
	var k paramKey
	s := strings.TrimSpace(raw)
	if strings.HasPrefix(s, "!") {
		k.expr = true
		s = strings.TrimSpace(s[1:])
	}
	if open := strings.LastIndexByte(s, '('); open > 0 && strings.HasSuffix(s, ")") {
		m := ParamMode(strings.ToUpper(strings.TrimSpace(s[open+1 : len(s)-1])))
		if !m.Valid() {
			return k, "unknown parameter mode " + strconv.Quote(string(m)) + " in " + strconv.Quote(raw)
		}
		k.mode = m
		s = strings.TrimSpace(s[:open])
	}
	if open := strings.IndexByte(s, '<'); open > 0 && strings.HasSuffix(s, ">") {
		spelled := strings.ToUpper(strings.ReplaceAll(s[open+1:len(s)-1], " ", ""))
		t, ok := dslTypeNames[spelled]
		if !ok {
			t = ParamType(spelled)
		}
		if !t.Valid() {
			return k, "unknown parameter type " + strconv.Quote(s[open+1:len(s)-1]) + " in " + strconv.Quote(raw) +
				"; use string, long, double, boolean, map, pmap or array<string|long|double|boolean>"
		}
		k.typ = t
		s = strings.TrimSpace(s[:open])
	}
	if s == "" {
		return k, "parameter name is empty in " + strconv.Quote(raw)
	}
	k.name = s
	return k, ""
}

// param converts one DSL parameter into into.
func (c *dslConverter) param(rawKey string, v *node, path string, into Params) {
	key, msg := parseParamKey(rawKey)
	if msg != "" {
		c.add(path, msg+v.pos())
		return
	}
	if _, dup := into[key.name]; dup {
		c.addf(path, "parameter %q is defined twice%s", key.name, v.pos())
		return
	}
	if v.kind == kindNull {
		c.addf(path, "parameter %q has no value%s", key.name, v.pos())
		return
	}
	var p Param
	switch {
	case key.expr:
		var text string
		if !c.scalarText(v, path, &text) {
			return
		}
		t := key.typ
		if t == "" {
			t = inferExprType(text)
		}
		p = ExpressionParam(t, text)
	case v.kind == kindString && stepRef.MatchString(v.text):
		var ok bool
		if p, ok = c.refParam(key, v, path, into); !ok {
			return
		}
	default:
		t := key.typ
		if t == "" {
			var ok bool
			if t, ok = c.inferType(v, path); !ok {
				return
			}
		}
		val, ok := c.literal(t, v, path)
		if !ok {
			return
		}
		p = LiteralParam(t, val)
	}
	p.Mode = key.mode
	into[key.name] = p
}

// stepRef matches ${name@step} and ${step__name}.
var stepRef = regexp.MustCompile(`\$\{\s*([^{}@\s]+)@([^{}@\s]+)\s*\}|\$\{\s*([^{}@\s]+?)__([^{}@\s]+?)\s*\}`)

// refParam turns a string with upstream step references into an expression: a single reference
// reads the step's parameter with params.getFromStep (its type is the referenced parameter's when
// known); references inside text are concatenated into a STRING.
func (c *dslConverter) refParam(key paramKey, v *node, path string, into Params) (Param, bool) {
	text := v.text
	matches := stepRef.FindAllStringSubmatchIndex(text, -1)
	ref := func(m []int) (step, name string) {
		if m[2] >= 0 {
			return text[m[4]:m[5]], text[m[2]:m[3]]
		}
		return text[m[6]:m[7]], text[m[8]:m[9]]
	}
	if len(matches) == 1 && strings.TrimSpace(text[:matches[0][0]]) == "" && strings.TrimSpace(text[matches[0][1]:]) == "" {
		step, name := ref(matches[0])
		p := ExpressionParam(key.typ, getFromStep(step, name))
		if key.typ == "" {
			c.pending = append(c.pending, pendingRef{into: into, name: key.name, step: step, param: name})
		}
		return p, true
	}
	if key.typ != "" && key.typ != ParamTypeString {
		c.addf(path, "a string with step references is a STRING, not %s%s", key.typ, v.pos())
		return Param{}, false
	}
	var parts []string
	last := 0
	for _, m := range matches {
		if m[0] > last {
			parts = append(parts, selQuote(text[last:m[0]]))
		}
		step, name := ref(m)
		parts = append(parts, getFromStep(step, name))
		last = m[1]
	}
	if last < len(text) {
		parts = append(parts, selQuote(text[last:]))
	}
	return ExpressionParam(ParamTypeString, strings.Join(parts, " + ")), true
}

func getFromStep(step, name string) string {
	return "params.getFromStep(" + selQuote(step) + ", " + selQuote(name) + ")"
}

// selQuote writes s as a single-quoted SEL string literal.
func selQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return "'" + r.Replace(s) + "'"
}

// resolvePending types parameters that read another step's parameter, once every job is known;
// an unknown reference leaves the parameter a STRING.
func (c *dslConverter) resolvePending() {
	for _, r := range c.pending {
		p := r.into[r.name]
		p.Type = ParamTypeString
		if src, ok := c.stepParams[r.step][r.param]; ok && src.Type.Valid() {
			p.Type = src.Type
		}
		r.into[r.name] = p
	}
}

// inferType derives a literal's type the way Maestro's DSL does.
func (c *dslConverter) inferType(v *node, path string) (ParamType, bool) {
	switch v.kind {
	case kindString:
		return ParamTypeString, true
	case kindBool:
		return ParamTypeBoolean, true
	case kindNumber:
		if _, err := strconv.ParseInt(v.text, 10, 64); err == nil {
			return ParamTypeLong, true
		}
		return ParamTypeDouble, true
	case kindObject:
		if len(v.vals) == 0 {
			return ParamTypeMap, true
		}
		for _, e := range v.vals {
			if e.kind != kindString {
				return ParamTypeMap, true
			}
		}
		return ParamTypeStringMap, true
	case kindArray:
		kinds := map[nodeKind]bool{}
		allInts := true
		for _, e := range v.items {
			kinds[e.kind] = true
			if e.kind == kindNumber {
				if _, err := strconv.ParseInt(e.text, 10, 64); err != nil {
					allInts = false
				}
			}
		}
		switch {
		case len(v.items) == 0 || (len(kinds) == 1 && kinds[kindString]):
			return ParamTypeStringArray, true
		case len(kinds) == 1 && kinds[kindBool]:
			return ParamTypeBooleanArray, true
		case len(kinds) == 1 && kinds[kindNumber] && allInts:
			return ParamTypeLongArray, true
		case len(kinds) == 1 && kinds[kindNumber]:
			return ParamTypeDoubleArray, true
		}
		c.add(path, "cannot infer the type of a list of mixed or nested values; annotate the name, e.g. name<array<string>>"+v.pos())
		return "", false
	}
	c.addf(path, "unsupported value %s%s", v.kind, v.pos())
	return "", false
}

// literal converts a DSL value to a value of type t.
func (c *dslConverter) literal(t ParamType, v *node, path string) (any, bool) {
	bad := func(at string, want string, got *node) (any, bool) {
		desc := got.kind.String()
		if got.kind == kindString || got.kind == kindNumber {
			desc += " " + strconv.Quote(got.text)
		}
		c.addf(at, "expected %s for %s, got %s%s", want, t, desc, got.pos())
		return nil, false
	}
	scalar := func(t ParamType, e *node, at string) (any, bool) {
		switch t {
		case ParamTypeString:
			if e.kind == kindString {
				return e.text, true
			}
			return bad(at, "a string", e)
		case ParamTypeLong:
			if e.kind == kindNumber {
				if _, err := strconv.ParseInt(e.text, 10, 64); err == nil {
					return json.Number(e.text), true
				}
			}
			return bad(at, "an integer", e)
		case ParamTypeDouble:
			if e.kind == kindNumber {
				return json.Number(e.text), true
			}
			return bad(at, "a number", e)
		case ParamTypeBoolean:
			if e.kind == kindBool {
				return e.b, true
			}
			return bad(at, "a boolean", e)
		}
		return nil, false
	}
	switch {
	case t == ParamTypeStringMap:
		if v.kind != kindObject {
			return bad(path, "a map of strings", v)
		}
		m := make(map[string]any, len(v.keys))
		ok := true
		for i, k := range v.keys {
			e, good := scalar(ParamTypeString, v.vals[i], joinKey(path, k))
			ok = ok && good
			m[k] = e
		}
		return m, ok
	case t == ParamTypeMap:
		if v.kind != kindObject {
			return bad(path, "a map", v)
		}
		nested := Params{}
		c.paramBlock(v, path, nested)
		return map[string]Param(nested), true
	case t.IsArray():
		if v.kind != kindArray {
			return bad(path, "a list", v)
		}
		out := make([]any, len(v.items))
		ok := true
		for i, e := range v.items {
			x, good := scalar(t.Elem(), e, joinIndex(path, i))
			ok = ok && good
			out[i] = x
		}
		return out, ok
	}
	return scalar(t, v, path)
}

// inferExprType guesses the type of an unannotated SEL expression from common array
// constructors and range helpers; anything else is a STRING, as in Maestro's DSL.
func inferExprType(expr string) ParamType {
	s := strings.TrimSpace(expr)
	s = strings.TrimSpace(strings.TrimPrefix(s, "return "))
	switch {
	case hasAnyPrefix(s, "new int[]", "new long[]", "new Integer[]", "new Long[]", "Util.intsBetween(", "Util.dateIntsBetween("):
		return ParamTypeLongArray
	case hasAnyPrefix(s, "new String[]"):
		return ParamTypeStringArray
	case hasAnyPrefix(s, "new double[]", "new float[]", "new Double[]"):
		return ParamTypeDoubleArray
	case hasAnyPrefix(s, "new boolean[]", "new Boolean[]"):
		return ParamTypeBooleanArray
	}
	return ParamTypeString
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
