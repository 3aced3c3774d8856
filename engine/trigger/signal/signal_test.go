package signal

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/maestro-aws/maestro/engine/workflow"
)

func TestMatchOperators(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		op   workflow.SignalOperator
		want any
		have any
		ok   bool
	}{
		{"long equal", "=", int64(5), int64(5), true},
		{"long not equal", "=", int64(5), int64(6), false},
		{"long greater", ">", int64(5), int64(6), true},
		{"long greater fails on equal", ">", int64(5), int64(5), false},
		{"long greater equals", ">=", int64(5), int64(5), true},
		{"long less", "<", int64(5), int64(4), true},
		{"long less equals", "<=", int64(5), int64(6), false},
		{"long from a json number", "=", int64(7), json.Number("7"), true},
		{"long from an integer string", "<", int64(10), "9", true},
		{"long numeric order, not text", ">", int64(9), int64(10), true},
		{"long against text", "=", int64(1), "one", false},
		{"string equal", "=", "sales", "sales", true},
		{"string not equal", "=", "sales", "Sales", false},
		{"string text order", ">=", "2026-11-20", "2026-11-21", true},
		{"string less", "<", "b", "a", true},
		{"string from an integer", "=", "20261121", int64(20261121), true},
		{"string against a fraction", "=", "1.5", json.Number("1.5"), false},
		{"unknown operator", "!=", int64(1), int64(2), false},
		{"unsupported wanted type", "=", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Match{Param: "p", Operator: tc.op, Value: tc.want}
			if got := m.holds(tc.have); got != tc.ok {
				t.Errorf("%v %s %v: got %v, want %v", tc.have, tc.op, tc.want, got, tc.ok)
			}
		})
	}
}

func TestDependencySatisfied(t *testing.T) {
	t.Parallel()
	d := Dependency{Name: "table_updated", Matches: []Match{
		{Param: "db", Operator: "=", Value: "sales"},
		{Param: "watermark", Operator: ">=", Value: int64(100)},
	}}
	for _, tc := range []struct {
		params map[string]any
		ok     bool
	}{
		{map[string]any{"db": "sales", "watermark": int64(100)}, true},
		{map[string]any{"db": "sales", "watermark": int64(150), "extra": "x"}, true},
		{map[string]any{"db": "sales", "watermark": int64(99)}, false},
		{map[string]any{"db": "ads", "watermark": int64(150)}, false},
		{map[string]any{"db": "sales"}, false}, // a missing param never matches
		{nil, false},
	} {
		if got := d.Satisfied(tc.params); got != tc.ok {
			t.Errorf("%v: got %v, want %v", tc.params, got, tc.ok)
		}
	}
	if !(Dependency{Name: "any"}).Satisfied(nil) {
		t.Error("a dependency without match params must be met by any signal of its name")
	}
}

func TestRequestCheck(t *testing.T) {
	t.Parallel()
	ok := Request{Name: "s", Params: map[string]any{"a": "x", "b": json.Number("9007199254740993"), "c": float64(3), "d": 4}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	if ok.Params["b"] != int64(9007199254740993) || ok.Params["c"] != int64(3) || ok.Params["d"] != int64(4) {
		t.Errorf("params not normalised: %#v", ok.Params)
	}
	for name, r := range map[string]Request{
		"no name":      {Name: " "},
		"nul in name":  {Name: "a\x00b"},
		"long name":    {Name: string(make([]byte, MaxNameLength+1))},
		"fraction":     {Name: "s", Params: map[string]any{"a": json.Number("1.5")}},
		"float":        {Name: "s", Params: map[string]any{"a": 1.5}},
		"bool":         {Name: "s", Params: map[string]any{"a": true}},
		"object":       {Name: "s", Params: map[string]any{"a": map[string]any{}}},
		"null":         {Name: "s", Params: map[string]any{"a": nil}},
		"too big":      {Name: "s", Params: map[string]any{"a": json.Number("9223372036854775808")}},
		"long request": {Name: "s", RequestID: string(make([]byte, MaxRequestIDLength+1))},
	} {
		if err := r.Check(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
