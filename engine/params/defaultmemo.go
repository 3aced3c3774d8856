package params

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/maestro-aws/maestro/sel"
)

// Every run evaluates Maestro's default params at its start (defaults.go),
// about 24 SEL programs of date arithmetic: ~45 % of the CPU and most of
// the 50 kB a run's workflow params cost to evaluate. Their values depend
// only on the params they read and on a few fields of the run
// (params.getFromInstance), and most of those inputs are the same for
// every run of an hour: the zones, the owner, TARGET_RUN_DATE and
// TARGET_RUN_HOUR, DERIVED_RUN_TS. So a default program's value is
// remembered by its inputs, and a run whose inputs were seen before gets
// the value without running the program. Only the defaults are
// remembered: they are pure functions of those inputs (no clock, no
// randomness), which a user's expression need not be. The programs that
// read RUN_TS itself (a millisecond clock) still run for each run.

// defaultMemoLimit bounds the values remembered; past it the memo starts
// again (a run's inputs change with the hour, so a few dozen are live).
const defaultMemoLimit = 4096

// defaultMemo holds remembered values of default programs by memo key.
var defaultMemo = struct {
	mu   sync.Mutex
	vals map[string]any
}{vals: map[string]any{}}

// instanceField finds the fields an expression reads from the run.
var instanceField = regexp.MustCompile(`params\.getFromInstance\("([^"]+)"\)`)

// defaultInputs are, per default param, the names its program reads and
// the run's fields it asks params.getFromInstance for.
var defaultInputs = sync.OnceValue(func() map[string]memoInputs {
	out := make(map[string]memoInputs, len(defaultExpressions))
	for name, prog := range defaultPrograms() {
		in := memoInputs{names: prog.Names()}
		for _, m := range instanceField.FindAllStringSubmatch(defaultExpressions[name], -1) {
			in.fields = append(in.fields, m[1])
		}
		out[name] = in
	}
	return out
})

type memoInputs struct {
	names, fields []string
}

// defaultMemoKey returns the key a default program's value is remembered
// by in this evaluation: the param's name, the values of the params it
// reads (those evaluated so far: vals) and the run's fields it reads. ok
// is false when the value cannot be remembered: name is not a default, or
// an input is not a scalar.
func defaultMemoKey(ctx context.Context, name string, vals map[string]any) (string, bool) {
	in, ok := defaultInputs()[name]
	if !ok {
		return "", false
	}
	var b strings.Builder
	b.Grow(64)
	b.WriteString(name)
	for _, n := range in.names {
		b.WriteByte(0)
		v, ok := vals[n]
		if !ok {
			b.WriteByte('-')
			continue
		}
		if !appendScalar(&b, v) {
			return "", false
		}
	}
	for _, f := range in.fields {
		v, err := getFromInstance(ctx, []any{f})
		if err != nil {
			return "", false
		}
		b.WriteByte(1)
		if !appendScalar(&b, v) {
			return "", false
		}
	}
	return b.String(), true
}

// appendScalar writes a scalar value, tagged with its type, to b.
func appendScalar(b *strings.Builder, v any) bool {
	switch v := v.(type) {
	case nil:
		b.WriteByte('n')
	case string:
		b.WriteByte('s')
		b.WriteString(v)
	case int64:
		b.WriteByte('i')
		b.WriteString(strconv.FormatInt(v, 10))
	case bool:
		b.WriteByte('b')
		b.WriteString(strconv.FormatBool(v))
	default:
		return false
	}
	return true
}

// rememberedDefault returns the remembered value for key.
func rememberedDefault(key string) (any, bool) {
	defaultMemo.mu.Lock()
	defer defaultMemo.mu.Unlock()
	v, ok := defaultMemo.vals[key]
	return v, ok
}

// rememberDefault remembers a default program's value when it is a
// scalar (the value is shared between runs, so nothing mutable).
func rememberDefault(key string, v any) {
	switch v.(type) {
	case nil, string, int64, bool:
	default:
		return
	}
	defaultMemo.mu.Lock()
	defer defaultMemo.mu.Unlock()
	if len(defaultMemo.vals) >= defaultMemoLimit {
		clear(defaultMemo.vals)
	}
	defaultMemo.vals[key] = v
}

// programNames returns the names prog reads: a default's from
// defaultInputs (sel copies them on every call of Names), else prog's.
func programNames(name string, prog *sel.Program) []string {
	if prog == defaultPrograms()[name] {
		return defaultInputs()[name].names
	}
	return prog.Names()
}
