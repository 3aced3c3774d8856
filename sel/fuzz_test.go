package sel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fuzzLimits keep each fuzz input cheap.
var fuzzLimits = Limits{
	MaxLoopIterations: 200,
	MaxArrayLength:    1000,
	MaxStringLength:   10000,
	MaxVisits:         50_000,
	MaxMemoryBytes:    1_000_000,
}

func addSeeds(f *testing.F) {
	for _, src := range allSources() {
		f.Add(src)
	}
}

// checkNoInternalError fails on errors that are not proper *Errors or that
// come from a recovered panic.
func checkNoInternalError(t *testing.T, src string, err error) {
	if err == nil {
		return
	}
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("%q: error is not a *Error: %T %v", src, err, err)
	}
	if strings.HasPrefix(se.Message, "internal error") {
		t.Fatalf("%q: %v\ncause: %v", src, se, se.Unwrap())
	}
	if se.Kind < KindSyntax || se.Kind > KindUserThrow || se.Line < 1 || se.Column < 1 {
		t.Fatalf("%q: malformed error %#v", src, se)
	}
	_ = se.Error()
}

func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Compile(src, WithLimits(fuzzLimits))
		checkNoInternalError(t, src, err)
		if err == nil {
			names := p.Names()
			for i := 1; i < len(names); i++ {
				if names[i-1] >= names[i] {
					t.Fatalf("%q: names not sorted and unique: %v", src, names)
				}
			}
		}
	})
}

func FuzzEval(f *testing.F) {
	addSeeds(f)
	env := MapEnv{
		"foo": int64(41), "s": "a,b,c", "arr": []int64{1, 2, 3}, "m": map[string]any{"k": "v"},
		"x": 1.5, "b": true, "start": int64(20200101),
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Compile(src, WithLimits(fuzzLimits), WithClock(func() time.Time { return testNow }))
		checkNoInternalError(t, src, err)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		v, err := p.Eval(ctx, env)
		checkNoInternalError(t, src, err)
		if err == nil {
			if _, merr := MarshalResult(v); merr != nil {
				t.Fatalf("%q: result %#v does not marshal: %v", src, v, merr)
			}
		}
	})
}
