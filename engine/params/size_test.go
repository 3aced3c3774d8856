package params_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Size measures what json.Marshal writes, never less (it may count a
// separator or a byte more per element).
func TestSizeMatchesJSON(t *testing.T) {
	t.Parallel()
	vals := params.Values{
		"s":     {Type: workflow.ParamTypeString, Value: "plain \"quoted\" <html> & \\ tab\t nl\n \x01 é 日本 \u2028 \xff"},
		"l":     {Type: workflow.ParamTypeLong, Value: int64(-1234567890123)},
		"d":     {Type: workflow.ParamTypeDouble, Value: 3.25e-7},
		"b":     {Type: workflow.ParamTypeBoolean, Value: true},
		"sa":    {Type: workflow.ParamTypeStringArray, Value: []string{"a", "", "c\"d"}},
		"la":    {Type: workflow.ParamTypeLongArray, Value: []int64{1, -2, 300}},
		"da":    {Type: workflow.ParamTypeDoubleArray, Value: []float64{0.5, 1e21, -2}},
		"ba":    {Type: workflow.ParamTypeBooleanArray, Value: []bool{true, false}},
		"empty": {Type: workflow.ParamTypeStringArray, Value: []string{}},
		"sm":    {Type: workflow.ParamTypeStringMap, Value: map[string]string{"k": "v", "<": ">"}},
		"m": {Type: workflow.ParamTypeMap, Value: map[string]any{"n": int64(1), "x": []any{"a", int64(2), nil, true},
			"o": map[string]any{"deep": 2.5}}},
	}
	encoded, err := json.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	got := params.Size(vals, 1<<30)
	if diff := got - len(encoded); diff < -2 || diff > len(encoded)/20 {
		t.Fatalf("Size = %d, json.Marshal wrote %d bytes: %s", got, len(encoded), encoded)
	}
}

// A SEL result that shares one string 25,000 times is ~100 MB of JSON;
// evaluation refuses it at once, without encoding it.
func TestHugeSharedResultFailsItsParam(t *testing.T) {
	t.Parallel()
	expr := `String s = "x".repeat(3900); String[] a = new String[25000];
		for (int i = 0; i < 25000; i++) { a[i] = s; } return a;`
	start := time.Now()
	_, err := params.Evaluate(context.Background(), workflow.Params{
		"big": {Type: workflow.ParamTypeStringArray, Expression: &expr},
	}, nil, nil)
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Param != "big" || !errors.Is(err, params.ErrTooLarge) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "750000") {
		t.Errorf("the error should name the limit: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// Several params that each fit may not exceed the limit together.
func TestParamsCountTogether(t *testing.T) {
	t.Parallel()
	defs := workflow.Params{}
	for _, n := range []string{"a", "b", "c"} {
		expr := `"y".repeat(300000)`
		defs[n] = workflow.Param{Type: workflow.ParamTypeString, Expression: &expr}
	}
	if _, err := params.Evaluate(context.Background(), defs, nil, nil); !errors.Is(err, params.ErrTooLarge) {
		t.Fatalf("err = %v", err)
	}
	delete(defs, "c")
	if _, err := params.Evaluate(context.Background(), defs, nil, nil); err != nil {
		t.Fatalf("two params of 300 KB: %v", err)
	}
}

func TestMergeOutputsChecksTheSize(t *testing.T) {
	t.Parallel()
	vals := params.Values{"a": {Type: workflow.ParamTypeString, Value: strings.Repeat("a", 500_000)}}
	outs := params.Values{"b": {Type: workflow.ParamTypeString, Value: strings.Repeat("b", 300_000)}}
	if _, err := params.MergeOutputs(vals, workflow.Params{}, outs); !errors.Is(err, params.ErrTooLarge) {
		t.Fatalf("err = %v", err)
	}
	outs["b"] = params.Value{Type: workflow.ParamTypeString, Value: "small"}
	if _, err := params.MergeOutputs(vals, workflow.Params{}, outs); err != nil {
		t.Fatal(err)
	}
}
