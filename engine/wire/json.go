package wire

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// Marshal encodes v compactly without escaping <, > and & (SEL conditions
// are full of them).
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// withOrdered appends the fields of m to the JSON object v encodes to:
// first those named in order, in that order, then the others sorted by
// key. A key the object already has is left out.
func withOrdered(v any, m map[string]json.RawMessage, order []string) ([]byte, error) {
	out, err := Marshal(v)
	if err != nil || len(m) == 0 {
		return out, err
	}
	var have map[string]json.RawMessage
	if err := json.Unmarshal(out, &have); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m))
	for _, k := range order {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(order, k) {
			keys = append(keys, k)
		}
	}
	out = out[:len(out)-1] // drop '}'
	first := len(have) == 0
	for _, k := range keys {
		if _, dup := have[k]; dup {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		name, err := Marshal(k)
		if err != nil {
			return nil, err
		}
		out = append(out, name...)
		out = append(out, ':')
		raw := m[k]
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		out = append(out, raw...)
	}
	return append(out, '}'), nil
}
