package glue

import (
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/stepruntime"
)

func TestSpec(t *testing.T) {
	a := &stepruntime.Attempt{Params: map[string]any{Param: map[string]any{"job_name": " nightly ",
		"arguments": map[string]any{"day": "20240101", "--rows": "5"}}}}
	sp, err := read(a)
	if err != nil || sp.JobName != "nightly" || sp.Arguments["--day"] != "20240101" || sp.Arguments["--rows"] != "5" {
		t.Fatalf("spec %+v %v", sp, err)
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{}, "job_name is required"},
		{map[string]any{"job_name": "j", "arguments": map[string]any{"maestro_step_instance_uuid": "x"}}, "set by Maestro"},
		{map[string]any{"job_name": "j", "timeout": "1h"}, "unknown field"},
	} {
		if _, err := read(&stepruntime.Attempt{Params: map[string]any{Param: c.m}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
	if _, err := read(&stepruntime.Attempt{}); err == nil || !strings.Contains(err.Error(), `needs the "glue" param`) {
		t.Errorf("no param: %v", err)
	}
}
