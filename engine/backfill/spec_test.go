package backfill

import (
	"errors"
	"slices"
	"testing"

	"github.com/maestro-aws/maestro/engine/workflow"
)

func TestExpand(t *testing.T) {
	cases := []struct {
		name   string
		spec   Spec
		format string
		want   []string
	}{
		{"days YYYYMMDD across a month and a leap day", Spec{From: "20240227", To: "20240302"}, FormatDate,
			[]string{"20240227", "20240228", "20240229", "20240301", "20240302"}},
		{"weeks", Spec{From: "20240101", To: "20240131", Interval: "7d"}, FormatDate,
			[]string{"20240101", "20240108", "20240115", "20240122", "20240129"}},
		{"dashed dates newest first", Spec{From: "2023-12-30", To: "2024-01-02", Order: OrderNewest}, FormatDashDate,
			[]string{"2024-01-02", "2024-01-01", "2023-12-31", "2023-12-30"}},
		{"hours default 1h across midnight", Spec{From: "2024013122", To: "2024020101"}, FormatHour,
			[]string{"2024013122", "2024013123", "2024020100", "2024020101"}},
		{"hours by 6h", Spec{From: "2024010100", To: "2024010112", Interval: "6h"}, FormatHour,
			[]string{"2024010100", "2024010106", "2024010112"}},
		{"hours by a day", Spec{From: "2024010105", To: "2024010305", Interval: "1d"}, FormatHour,
			[]string{"2024010105", "2024010205", "2024010305"}},
		{"one day", Spec{From: "20240101", To: "20240101"}, FormatDate, []string{"20240101"}},
		{"long range", Spec{From: "5", To: "20", Interval: "5", Format: FormatLong}, FormatLong, []string{"5", "10", "15", "20"}},
		{"long range detected", Spec{From: "100", To: "102"}, FormatLong, []string{"100", "101", "102"}},
		{"long range to a value the step passes", Spec{From: "1", To: "6", Interval: "4"}, FormatLong, []string{"1", "5"}},
		{"values keep their order", Spec{Values: []string{"us", "eu", "ap"}}, FormatString, []string{"us", "eu", "ap"}},
		{"values newest reverses", Spec{Values: []string{"20240103", "20240101"}, Order: OrderNewest}, FormatDate,
			[]string{"20240101", "20240103"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			format, got, err := c.spec.Expand()
			if err != nil {
				t.Fatal(err)
			}
			if format != c.format || !slices.Equal(got, c.want) {
				t.Fatalf("Expand() = %s %v, want %s %v", format, got, c.format, c.want)
			}
		})
	}
}

func TestExpandRefuses(t *testing.T) {
	cases := map[string]Spec{
		"nothing":               {},
		"both range and values": {From: "20240101", To: "20240102", Values: []string{"20240101"}},
		"from after to":         {From: "20240102", To: "20240101"},
		"missing to":            {From: "20240102"},
		"bad date":              {From: "20240230", To: "20240301", Format: FormatDate},
		"mixed formats":         {From: "20240101", To: "2024-01-05"},
		"hours on days":         {From: "20240101", To: "20240105", Interval: "1h"},
		"bad interval":          {From: "20240101", To: "20240105", Interval: "1w"},
		"zero interval":         {From: "20240101", To: "20240105", Interval: "0d"},
		"long interval word":    {From: "1", To: "5", Interval: "1d"},
		"string range":          {From: "a", To: "b"},
		"duplicate values":      {Values: []string{"a", "a"}},
		"value in wrong format": {Values: []string{"20240101", "x"}},
		"bad order":             {From: "20240101", To: "20240102", Order: "random"},
		"bad format":            {From: "20240101", To: "20240102", Format: "MMDD"},
		"too many":              {From: "1", To: "100000000"},
		"too many days":         {From: "10000101", To: "99991231"},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			if _, v, err := spec.Expand(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Expand() = %d values, %v; want ErrInvalid", len(v), err)
			}
		})
	}
}

func TestParamTypeAndValue(t *testing.T) {
	wf := &workflow.Workflow{Params: workflow.Params{
		"L": {Type: workflow.ParamTypeLong}, "S": {Type: workflow.ParamTypeString}, "B": {Type: workflow.ParamTypeBoolean}}}
	for _, c := range []struct {
		param, format string
		want          workflow.ParamType
		bad           bool
	}{
		{"L", FormatDate, workflow.ParamTypeLong, false},
		{"L", FormatDashDate, "", true},
		{"S", FormatDate, workflow.ParamTypeString, false},
		{"B", FormatDate, "", true},
		{"UNDECLARED", FormatDate, workflow.ParamTypeString, false},
		{"UNDECLARED", FormatLong, workflow.ParamTypeLong, false},
		{"UNDECLARED", FormatDashDate, workflow.ParamTypeString, false},
	} {
		got, err := ParamType(wf, c.param, c.format)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ParamType(%s, %s) = %q, %v", c.param, c.format, got, err)
		}
	}
	p, err := ParamValue(workflow.ParamTypeLong, "20240101")
	if err != nil || p.Value != int64(20240101) || p.Type != workflow.ParamTypeLong {
		t.Fatalf("LONG value = %#v, %v", p, err)
	}
	p, err = ParamValue(workflow.ParamTypeString, "20240101")
	if err != nil || p.Value != "20240101" || p.Type != workflow.ParamTypeString {
		t.Fatalf("STRING value = %#v, %v", p, err)
	}
}

func TestTransitions(t *testing.T) {
	ok := []struct {
		from Status
		a    Action
		to   Status
	}{
		{Running, ActionPause, Paused}, {Paused, ActionResume, Running}, {Running, ActionCancel, Cancelled},
		{Paused, ActionCancel, Cancelled}, {Failed, ActionRetry, Running}, {Running, ActionRetry, Running},
	}
	for _, c := range ok {
		if got, err := Next(c.from, c.a); err != nil || got != c.to {
			t.Errorf("Next(%s, %s) = %s, %v; want %s", c.from, c.a, got, err, c.to)
		}
	}
	for _, c := range []struct {
		from Status
		a    Action
	}{{Paused, ActionPause}, {Running, ActionResume}, {Succeeded, ActionCancel}, {Cancelled, ActionResume},
		{Succeeded, ActionRetry}, {Cancelled, ActionRetry}} {
		if _, err := Next(c.from, c.a); !errors.Is(err, ErrInvalidTransition) {
			t.Errorf("Next(%s, %s) = %v; want ErrInvalidTransition", c.from, c.a, err)
		}
	}
}
