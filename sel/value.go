package sel

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// kind is the runtime type of a value.
type kind uint8

const (
	kNull kind = iota
	kLong
	kDouble
	kBool
	kString
	kArray
	kMap
	kDateTime
	kZone
	kFormatter
	kProperty
	kDays
	kUUID
)

// value is the evaluator's tagged representation of a SEL value. Scalars
// live inline (n for long and boolean, f for double, s for String and UUID)
// so that arithmetic never allocates. Reference types keep a pointer in o:
// *array, *mapObj, *zone, *formatter, *property. A DateTime keeps its instant
// in n (epoch milliseconds) and its zone in o.
type value struct {
	k kind
	n int64
	f float64
	s string
	o any
}

// array is a one-dimensional SEL array. Its elements share one element kind
// (kLong, kDouble, kBool or kString); String elements may be null.
type array struct {
	elem kind
	v    []value
}

// mapObj is SEL's Map<String, Object>.
type mapObj struct {
	m map[string]value
}

var (
	nullV  = value{}
	trueV  = value{k: kBool, n: 1}
	falseV = value{k: kBool}
)

func longV(n int64) value     { return value{k: kLong, n: n} }
func doubleV(f float64) value { return value{k: kDouble, f: f} }
func strV(s string) value     { return value{k: kString, s: s} }

func boolV(b bool) value {
	if b {
		return trueV
	}
	return falseV
}

func (v value) arr() *array { return v.o.(*array) }
func (v value) mp() *mapObj { return v.o.(*mapObj) }
func (v value) zone() *zone { return v.o.(*zone) }

// typeName names v's type the way a Java user would.
func (v value) typeName() string {
	switch v.k {
	case kNull:
		return "null"
	case kLong:
		return "long"
	case kDouble:
		return "double"
	case kBool:
		return "boolean"
	case kString:
		return "String"
	case kArray:
		return elemTypeName(v.arr().elem) + "[]"
	case kMap:
		return "Map"
	case kDateTime:
		return "DateTime"
	case kZone:
		return "DateTimeZone"
	case kFormatter:
		return "DateTimeFormatter"
	case kProperty:
		return "DateTime.Property"
	case kDays:
		return "Days"
	case kUUID:
		return "UUID"
	}
	return "unknown"
}

func elemTypeName(k kind) string {
	switch k {
	case kLong:
		return "long"
	case kDouble:
		return "double"
	case kBool:
		return "boolean"
	default:
		return "String"
	}
}

// javaString converts v as Java's String.valueOf does. Arrays print like
// Arrays.toString and maps like HashMap.toString with sorted keys (Java would
// print an identity hash for arrays and hash order for maps).
func javaString(v value) string {
	switch v.k {
	case kNull:
		return "null"
	case kLong:
		return strconv.FormatInt(v.n, 10)
	case kDouble:
		return javaDouble(v.f)
	case kBool:
		if v.n != 0 {
			return "true"
		}
		return "false"
	case kString, kUUID:
		return v.s
	case kArray:
		a := v.arr()
		var b strings.Builder
		b.WriteByte('[')
		for i, e := range a.v {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(javaString(e))
		}
		b.WriteByte(']')
		return b.String()
	case kMap:
		m := v.mp().m
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(javaString(m[k]))
		}
		b.WriteByte('}')
		return b.String()
	case kDateTime:
		return isoString(v.n, v.zone())
	case kZone:
		return v.zone().id
	case kFormatter:
		return "DateTimeFormatter[" + v.o.(*formatter).pattern + "]"
	case kProperty:
		return "Property[" + v.o.(*property).field.name + "]"
	case kDays:
		return "P" + strconv.FormatInt(v.n, 10) + "D"
	}
	return ""
}

// fromGo converts a Go value supplied by the caller (an Env entry or an
// extension function's result) into a value.
func fromGo(x any) (value, error) {
	switch t := x.(type) {
	case nil:
		return nullV, nil
	case value:
		return t, nil
	case bool:
		return boolV(t), nil
	case string:
		return strV(t), nil
	case int:
		return longV(int64(t)), nil
	case int8:
		return longV(int64(t)), nil
	case int16:
		return longV(int64(t)), nil
	case int32:
		return longV(int64(t)), nil
	case int64:
		return longV(t), nil
	case uint8:
		return longV(int64(t)), nil
	case uint16:
		return longV(int64(t)), nil
	case uint32:
		return longV(int64(t)), nil
	case uint:
		if uint64(t) > math.MaxInt64 {
			return nullV, fmt.Errorf("integer %d overflows long", t)
		}
		return longV(int64(t)), nil
	case uint64:
		if t > math.MaxInt64 {
			return nullV, fmt.Errorf("integer %d overflows long", t)
		}
		return longV(int64(t)), nil
	case float32:
		return doubleV(float64(t)), nil
	case float64:
		return doubleV(t), nil
	case json.Number:
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return longV(n), nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !isRangeErr(err) {
			return nullV, fmt.Errorf("invalid number %q", string(t))
		}
		return doubleV(f), nil
	case time.Time:
		return value{k: kDateTime, n: t.UnixMilli(), o: zoneOfLocation(t.Location())}, nil
	case []string:
		return goArray(kString, t, strV), nil
	case []int64:
		return goArray(kLong, t, longV), nil
	case []int:
		return goArray(kLong, t, func(n int) value { return longV(int64(n)) }), nil
	case []int32:
		return goArray(kLong, t, func(n int32) value { return longV(int64(n)) }), nil
	case []float64:
		return goArray(kDouble, t, doubleV), nil
	case []float32:
		return goArray(kDouble, t, func(f float32) value { return doubleV(float64(f)) }), nil
	case []bool:
		return goArray(kBool, t, boolV), nil
	case []any:
		return fromGoSlice(t)
	case map[string]any:
		m := &mapObj{m: make(map[string]value, len(t))}
		for k, e := range t {
			ev, err := fromGo(e)
			if err != nil {
				return nullV, fmt.Errorf("map entry %q: %w", k, err)
			}
			m.m[k] = ev
		}
		return value{k: kMap, o: m}, nil
	case map[string]string:
		m := &mapObj{m: make(map[string]value, len(t))}
		for k, e := range t {
			m.m[k] = strV(e)
		}
		return value{k: kMap, o: m}, nil
	case MapEnv:
		return fromGo(map[string]any(t))
	}
	return nullV, fmt.Errorf("unsupported Go type %T", x)
}

// fromGoSlice converts a []any (as produced by encoding/json) into the
// array type its elements share: all strings, all integers, numbers with at
// least one fraction, or all booleans. An empty slice is a String[].
func fromGoSlice(t []any) (value, error) {
	elems := make([]value, len(t))
	elem := kNull
	for i, e := range t {
		ev, err := fromGo(e)
		if err != nil {
			return nullV, fmt.Errorf("array element %d: %w", i, err)
		}
		switch {
		case ev.k == kNull:
			if elem != kNull && elem != kString {
				return nullV, fmt.Errorf("array element %d: null in a %s array", i, elemTypeName(elem))
			}
		case ev.k == kLong || ev.k == kDouble:
			if elem == kNull {
				elem = ev.k
			} else if elem == kLong && ev.k == kDouble {
				elem = kDouble
			} else if elem != kLong && elem != kDouble {
				return nullV, fmt.Errorf("array element %d: mixed element types", i)
			}
		case ev.k == kBool || ev.k == kString:
			if elem == kNull {
				elem = ev.k
			} else if elem != ev.k {
				return nullV, fmt.Errorf("array element %d: mixed element types", i)
			}
		default:
			return nullV, fmt.Errorf("array element %d: unsupported element type %s", i, ev.typeName())
		}
		elems[i] = ev
	}
	if elem == kNull {
		elem = kString
	}
	for i, e := range elems {
		if e.k == kNull && elem != kString {
			return nullV, fmt.Errorf("array element %d: null in a %s array", i, elemTypeName(elem))
		}
		if elem == kDouble && e.k == kLong {
			elems[i] = doubleV(float64(e.n))
		}
	}
	return value{k: kArray, o: &array{elem: elem, v: elems}}, nil
}

// toGo converts a value into the Go representation documented on
// Program.Eval. With forResult set, values that are not Maestro param types
// (DateTime, zones, formatters...) are an error; otherwise (arguments for
// extension functions) a DateTime becomes a time.Time, a zone a
// *time.Location and anything else its string form.
func toGo(v value, forResult bool) (any, error) {
	switch v.k {
	case kNull:
		return nil, nil
	case kLong:
		return v.n, nil
	case kDouble:
		return v.f, nil
	case kBool:
		return v.n != 0, nil
	case kString:
		return v.s, nil
	case kArray:
		a := v.arr()
		switch a.elem {
		case kLong:
			out := make([]int64, len(a.v))
			for i, e := range a.v {
				out[i] = e.n
			}
			return out, nil
		case kDouble:
			out := make([]float64, len(a.v))
			for i, e := range a.v {
				out[i] = e.f
			}
			return out, nil
		case kBool:
			out := make([]bool, len(a.v))
			for i, e := range a.v {
				out[i] = e.n != 0
			}
			return out, nil
		default:
			out := make([]string, len(a.v))
			for i, e := range a.v {
				out[i] = e.s
			}
			return out, nil
		}
	case kMap:
		m := v.mp().m
		out := make(map[string]any, len(m))
		for k, e := range m {
			g, err := toGo(e, forResult)
			if err != nil {
				return nil, fmt.Errorf("map entry %q: %w", k, err)
			}
			out[k] = g
		}
		return out, nil
	}
	if forResult {
		return nil, fmt.Errorf("a %s is not a Maestro param type (convert it with toString() or getMillis())", v.typeName())
	}
	switch v.k {
	case kDateTime:
		return time.UnixMilli(v.n).In(v.zone().loc), nil
	case kZone:
		return v.zone().loc, nil
	}
	return javaString(v), nil
}

// goArray converts a typed Go slice into a SEL array of elem.
func goArray[T any](elem kind, xs []T, conv func(T) value) value {
	a := &array{elem: elem, v: make([]value, len(xs))}
	for i, x := range xs {
		a.v[i] = conv(x)
	}
	return value{k: kArray, o: a}
}
