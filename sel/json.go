package sel

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// MarshalResult encodes a value returned by Program.Eval as JSON. Doubles
// keep Java's Double.toString form (2.0, 1.0E10) so that a DOUBLE result
// stays distinguishable from a LONG one; NaN and the infinities, which JSON
// cannot hold, become the strings "NaN", "Infinity" and "-Infinity". Map keys
// are sorted.
func MarshalResult(v any) ([]byte, error) {
	return appendJSON(nil, v)
}

func appendJSON(b []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, t), nil
	case int64:
		return strconv.AppendInt(b, t, 10), nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return strconv.AppendQuote(b, javaDouble(t)), nil
		}
		return append(b, javaDouble(t)...), nil
	case string:
		s, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		return append(b, s...), nil
	case []int64:
		return appendArray(b, t)
	case []float64:
		return appendArray(b, t)
	case []bool:
		return appendArray(b, t)
	case []string:
		return appendArray(b, t)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = appendJSON(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, t[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("sel: cannot encode %T as a result", v)
}

// appendArray writes xs as a JSON array, each element as appendJSON does.
func appendArray[T any](b []byte, xs []T) ([]byte, error) {
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendJSON(b, x); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}
