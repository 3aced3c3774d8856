package signalmsg

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Rule maps S3 objects to a signal: an object event whose bucket, key
// prefix, key suffix and event match announces the signal Signal (see
// docs/signals.md). MAESTRO_S3_SIGNAL_RULES holds a JSON array of rules;
// every matching rule announces its signal.
//
//	[{"bucket": "raw-events", "prefix": "sales/", "suffix": ".parquet",
//	  "key_pattern": "sales/{table}/dt={dt}/{file}",
//	  "signal": "s3/raw-events/{table}"}]
type Rule struct {
	// Bucket is the bucket's name; "*" matches any.
	Bucket string `json:"bucket"`
	// Prefix and Suffix, when set, must begin and end the object key.
	Prefix string `json:"prefix,omitempty"`
	Suffix string `json:"suffix,omitempty"`
	// Events are the S3 event names the rule takes ("ObjectCreated:*" by
	// default; "ObjectCreated:Put", "ObjectRemoved:*", "*", ...).
	Events []string `json:"events,omitempty"`
	// KeyPattern, when set, must match the whole key: literal text and
	// {name} placeholders, each matching within one path segment, whose
	// values become params (and may name the signal).
	KeyPattern string `json:"key_pattern,omitempty"`
	// Signal is the signal name; {name} placeholders take the value of a
	// param (bucket, key, a key pattern's or a partition's).
	Signal string `json:"signal"`
	// Params are constant params added to every signal of the rule.
	Params map[string]string `json:"params,omitempty"`

	pattern *regexp.Regexp
}

// Rules are the configured rules, in order.
type Rules []Rule

var placeholderRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ParseRules parses and checks MAESTRO_S3_SIGNAL_RULES ("" and "[]" are no
// rules).
func ParseRules(s string) (Rules, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var rules Rules
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("MAESTRO_S3_SIGNAL_RULES: want a JSON array of rules: %w", err)
	}
	var problems []error
	for i := range rules {
		r := &rules[i]
		if r.Bucket == "" {
			problems = append(problems, fmt.Errorf("rule %d: bucket is required (\"*\" for any)", i))
		}
		if strings.TrimSpace(r.Signal) == "" {
			problems = append(problems, fmt.Errorf("rule %d: signal is required", i))
		}
		if len(r.Events) == 0 {
			r.Events = []string{"ObjectCreated:*"}
		}
		if r.KeyPattern != "" {
			re, err := compilePattern(r.KeyPattern)
			if err != nil {
				problems = append(problems, fmt.Errorf("rule %d: key_pattern: %w", i, err))
			}
			r.pattern = re
		}
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("MAESTRO_S3_SIGNAL_RULES: %w", err)
	}
	return rules, nil
}

// compilePattern turns a key pattern into an anchored regular expression
// with a named group per placeholder.
func compilePattern(p string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	seen := map[string]bool{}
	last := 0
	for _, m := range placeholderRE.FindAllStringSubmatchIndex(p, -1) {
		b.WriteString(regexp.QuoteMeta(p[last:m[0]]))
		name := p[m[2]:m[3]]
		if seen[name] {
			return nil, fmt.Errorf("placeholder {%s} appears twice", name)
		}
		seen[name] = true
		b.WriteString("(?P<" + name + ">[^/]*)")
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(p[last:]))
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// matches reports whether the rule takes an object event, and returns the
// key pattern's values.
func (r *Rule) matches(bucket, key, event string) (map[string]string, bool) {
	if r.Bucket != "*" && r.Bucket != bucket {
		return nil, false
	}
	if !strings.HasPrefix(key, r.Prefix) || !strings.HasSuffix(key, r.Suffix) {
		return nil, false
	}
	ok := false
	for _, e := range r.Events {
		e = strings.TrimPrefix(e, "s3:")
		if e == "*" || e == event || (strings.HasSuffix(e, ":*") && strings.HasPrefix(event, strings.TrimSuffix(e, "*"))) {
			ok = true
			break
		}
	}
	if !ok {
		return nil, false
	}
	vals := map[string]string{}
	if r.pattern != nil {
		m := r.pattern.FindStringSubmatch(key)
		if m == nil {
			return nil, false
		}
		for i, name := range r.pattern.SubexpNames() {
			if name != "" {
				vals[name] = m[i]
			}
		}
	}
	return vals, true
}

// signalName fills the rule's placeholders from params; a placeholder
// without a value is an error.
func (r *Rule) signalName(params map[string]any) (string, error) {
	var missing []string
	name := placeholderRE.ReplaceAllStringFunc(r.Signal, func(ph string) string {
		k := ph[1 : len(ph)-1]
		v, ok := params[k]
		if !ok {
			missing = append(missing, k)
			return ph
		}
		return fmt.Sprint(v)
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("signal %q: no value for {%s}", r.Signal, strings.Join(missing, "}, {"))
	}
	return name, nil
}
