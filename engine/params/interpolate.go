package params

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ref is one reference found in a literal string: $name, ${name},
// ${name@step} or ${step__name}. step is empty for a reference to a param
// of the same scope.
type ref struct {
	name, step string
	// start and end delimit the reference in the text.
	start, end int
}

// parseRefs finds the references in s. "$$" is an escaped "$" and a "$"
// followed by anything that cannot start a name is kept as it is.
func parseRefs(s string) ([]ref, error) {
	var out []ref
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			continue
		}
		switch c := s[i+1]; {
		case c == '$':
			i++ // escaped
		case c == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ${ at offset %d in %q", i, s)
			}
			body := strings.TrimSpace(s[i+2 : i+2+end])
			r := ref{start: i, end: i + 3 + end}
			switch {
			case body == "":
				return nil, fmt.Errorf("empty ${} at offset %d in %q", i, s)
			case strings.Contains(body, "@"):
				name, step, _ := strings.Cut(body, "@")
				r.name, r.step = strings.TrimSpace(name), strings.TrimSpace(step)
			case strings.Contains(body, "__"):
				step, name, _ := strings.Cut(body, "__")
				r.name, r.step = name, step
			default:
				r.name = body
			}
			if r.name == "" || (strings.Contains(body, "@") && r.step == "") {
				return nil, fmt.Errorf("malformed reference %q in %q", s[r.start:r.end], s)
			}
			out = append(out, r)
			i = r.end - 1
		case isNameStart(c):
			j := i + 2
			for j < len(s) && isNameChar(s[j]) {
				j++
			}
			r := ref{name: s[i+1 : j], start: i, end: j}
			if step, name, ok := strings.Cut(r.name, "__"); ok && step != "" && name != "" {
				r.step, r.name = step, name
			}
			out = append(out, r)
			i = j - 1
		}
	}
	return out, nil
}

func isNameStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isNameChar(c byte) bool { return isNameStart(c) || (c >= '0' && c <= '9') }

// interpolate replaces the references in s with the values lookup returns
// and "$$" with "$". A reference lookup does not know is an error.
func interpolate(s string, lookup func(r ref) (any, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	refs, err := parseRefs(s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	write := func(upto int) {
		// Copy s[last:upto], unescaping "$$".
		b.WriteString(strings.ReplaceAll(s[last:upto], "$$", "$"))
	}
	for _, r := range refs {
		write(r.start)
		v, ok := lookup(r)
		if !ok {
			if r.step != "" {
				return "", fmt.Errorf("%s references param %s of step %s, which is not available", s[r.start:r.end], r.name, r.step)
			}
			return "", fmt.Errorf("%s references unknown param %s (write $$ for a literal $)", s[r.start:r.end], r.name)
		}
		b.WriteString(format(v))
		last = r.end
	}
	write(len(s))
	return b.String(), nil
}

// format renders a value for a string: scalars in their plain form,
// arrays and maps as JSON.
func format(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return x.String()
	case nil:
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// stringsIn returns the string literals of a literal def that are
// interpolated: a STRING, the elements of a STRING_ARRAY and the values of a
// STRING_MAP. MAP members are defs of their own.
func stringsIn(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case []string:
		return x
	case map[string]any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case map[string]string:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, e)
		}
		return out
	}
	return nil
}

// interpolateValue interpolates every string of a literal value.
func interpolateValue(v any, lookup func(r ref) (any, bool)) (any, error) {
	switch x := v.(type) {
	case string:
		return interpolate(x, lookup)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				out[i] = e
				continue
			}
			r, err := interpolate(s, lookup)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = r
		}
		return out, nil
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			r, err := interpolate(s, lookup)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			s, ok := e.(string)
			if !ok {
				out[k] = e
				continue
			}
			r, err := interpolate(s, lookup)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", k, err)
			}
			out[k] = r
		}
		return out, nil
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, s := range x {
			r, err := interpolate(s, lookup)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", k, err)
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

// Interpolate replaces $name and ${name} in s with values from vals, and
// $$ with $. It resolves definition fields written with params, such as a
// step timeout of "${hours}h".
func Interpolate(s string, vals map[string]any) (string, error) {
	return interpolate(s, func(r ref) (any, bool) {
		if r.step != "" {
			return nil, false
		}
		v, ok := vals[r.name]
		return v, ok
	})
}
