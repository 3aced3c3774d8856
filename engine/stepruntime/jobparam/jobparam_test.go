package jobparam_test

import (
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/stepruntime/jobparam"
)

func TestReader(t *testing.T) {
	if _, err := jobparam.Open(map[string]any{"job": "x"}, "job", "a field"); err == nil || !strings.Contains(err.Error(), `needs the "job" param: a MAP with a field`) {
		t.Fatalf("not a map: %v", err)
	}
	r, err := jobparam.Open(map[string]any{"job": map[string]any{
		"name": " etl ", "args": []any{"a", "b"}, "env": map[string]any{"K": "v"}, "n": int64(3), "on": true,
		"wait": "90s", "short": "1ms", "secs": int64(2), "nested": map[string]any{"x": "y", "bad": true}, "extra": 1,
	}}, "job", "")
	if err != nil {
		t.Fatal(err)
	}
	r.Known("name", "args", "env", "n", "on", "wait", "short", "secs", "nested", "missing")
	if r.String("name", "") != "etl" || strings.Join(r.Strings("args"), ",") != "a,b" || r.StringMap("env")["K"] != "v" ||
		r.Long("n", 0) != 3 || !r.Bool("on", false) || r.Duration("wait", 0, time.Second) != 90*time.Second ||
		r.Duration("secs", 0, time.Second) != 2*time.Second || r.String("missing", "dflt") != "dflt" || !r.Has("extra") {
		t.Error("a field read wrong")
	}
	r.Duration("short", time.Minute, time.Second)
	r.Required("missing")
	sub := r.Sub("nested")
	sub.Known("x")
	r.Absorb(sub)
	if got := r.Others("name", "args"); len(got) != 8 || got["extra"] != 1 {
		t.Errorf("others %v", got)
	}
	err = r.Err()
	for _, want := range []string{"job.extra: unknown field", "job.short: 1ms is shorter than 1s", "job.missing is required", "job.nested.bad: unknown field"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors %v lack %q", err, want)
		}
	}
	// A STRING_MAP param (the YAML DSL's plain maps) reads as a MAP.
	r, err = jobparam.Open(map[string]any{"job": map[string]string{"input_path": "s3://b/k"}}, "job", "")
	if err != nil || r.Required("input_path") != "s3://b/k" || r.Err() != nil {
		t.Errorf("STRING_MAP: %v %v", err, r.Err())
	}
}
