package sel

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testNow pins the clock for every table case: Monday 2024-07-22T12:34:56.789Z.
var testNow = time.Date(2024, 7, 22, 12, 34, 56, 789e6, time.UTC)

// evalCase is one table-driven expectation. With errKind set the case must
// fail with that kind (and errHas in the message); otherwise the result must
// equal want (NaN compares equal to NaN).
type evalCase struct {
	name    string
	src     string
	env     MapEnv
	want    any
	errKind ErrorKind
	errHas  string
	opts    []Option
}

func run(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		name := tc.name
		if name == "" {
			name = tc.src
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkCase(t, tc)
		})
	}
}

func evalSrc(src string, env Env, opts ...Option) (any, error) {
	opts = append([]Option{WithClock(func() time.Time { return testNow })}, opts...)
	p, err := Compile(src, opts...)
	if err != nil {
		return nil, err
	}
	return p.Eval(context.Background(), env)
}

func checkCase(t *testing.T, tc evalCase) {
	t.Helper()
	var env Env
	if tc.env != nil {
		env = tc.env
	}
	got, err := evalSrc(tc.src, env, tc.opts...)
	if tc.errKind != 0 {
		var se *Error
		if !errors.As(err, &se) {
			t.Fatalf("%s: want %v error, got %#v, %v", tc.src, tc.errKind, got, err)
		}
		if se.Kind != tc.errKind {
			t.Fatalf("%s: want kind %v, got %v: %v", tc.src, tc.errKind, se.Kind, err)
		}
		if tc.errHas != "" && !strings.Contains(se.Error(), tc.errHas) {
			t.Fatalf("%s: error %q does not contain %q", tc.src, se.Error(), tc.errHas)
		}
		if strings.Contains(se.Message, "internal error") {
			t.Fatalf("%s: internal error: %v", tc.src, se)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", tc.src, err)
	}
	if !sameValue(got, tc.want) {
		t.Fatalf("%s:\n got %#v\nwant %#v", tc.src, got, tc.want)
	}
}

func sameValue(a, b any) bool {
	if fa, ok := a.(float64); ok {
		if fb, ok := b.(float64); ok {
			if math.IsNaN(fa) && math.IsNaN(fb) {
				return true
			}
			return fa == fb && math.Signbit(fa) == math.Signbit(fb)
		}
	}
	return reflect.DeepEqual(a, b)
}

// allSources returns every table expression, the seed corpus for the fuzz
// targets.
func allSources() []string {
	var out []string
	for _, table := range [][]evalCase{
		literalCases, arithmeticCases, stringConcatCases, logicCases, statementCases,
		arrayCases, mapCases, paramCases, stringCases, formatCases, mathCases,
		dateTimeCases, utilCases, icebergCases, errorCases, limitCases, safetyCases,
	} {
		for _, tc := range table {
			out = append(out, tc.src)
		}
	}
	return out
}

func jsonNumber(s string) json.Number { return json.Number(s) }
