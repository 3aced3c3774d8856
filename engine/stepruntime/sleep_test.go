package stepruntime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSleepDuration(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		params map[string]any
		config map[string]json.RawMessage
		want   time.Duration
	}{
		{"Maestro's default without sleep_seconds", nil, nil, 3 * time.Second},
		{"param seconds", map[string]any{"sleep_seconds": int64(7)}, nil, 7 * time.Second},
		{"param fraction", map[string]any{"sleep_seconds": 0.5}, nil, 500 * time.Millisecond},
		{"field seconds", nil, map[string]json.RawMessage{"sleep_seconds": json.RawMessage(`10`)}, 10 * time.Second},
		{"field duration", nil, map[string]json.RawMessage{"sleep_seconds": json.RawMessage(`"2 minutes"`)}, 2 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &Attempt{Params: c.params, Config: c.config, StartTime: start}
			if r := (Sleep{}).Start(context.Background(), a); r.State != Done {
				t.Fatalf("Start: %+v", r)
			}
			now := start.Add(c.want - time.Millisecond)
			r := Sleep{Now: func() time.Time { return now }}.Execute(context.Background(), a)
			if r.State != Continue || r.NextPollDelay != time.Millisecond {
				t.Fatalf("just before %s: %+v", c.want, r)
			}
			now = start.Add(c.want)
			if r := (Sleep{Now: func() time.Time { return now }}).Execute(context.Background(), a); r.State != Done {
				t.Fatalf("at %s: %+v", c.want, r)
			}
		})
	}
	neg := &Attempt{Params: map[string]any{"sleep_seconds": int64(-1)}}
	if r := (Sleep{}).Start(context.Background(), neg); r.State != FatalError {
		t.Fatalf("negative sleep_seconds: %+v", r)
	}
	// A value from params is bounded as at push (issue 27 N5): 1e18
	// seconds overflowed into a sleep that ended at once.
	for _, bad := range []*Attempt{
		{Params: map[string]any{"sleep_seconds": 1e18}},
		{Params: map[string]any{"sleep_seconds": int64(1) << 62}},
		{Config: map[string]json.RawMessage{"sleep_seconds": json.RawMessage(`"200d"`)}},
	} {
		if r := (Sleep{}).Execute(context.Background(), bad); r.State != FatalError || !strings.Contains(r.Message, "120 days") {
			t.Errorf("sleep %v %s: %+v", bad.Params, bad.Config, r)
		}
	}
}
