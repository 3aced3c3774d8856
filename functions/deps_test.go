// Package functions_test holds the rule that each Lambda links only what
// its job needs (docs/architecture.md): the API, signals and time-trigger
// Lambdas carry neither the actor engine (engine/flow) nor the web UI, and
// the signals and time-trigger Lambdas not the REST API either.
package functions_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/maestro-aws/maestro/"

// goList runs the go command's list with args in this module.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	out, err := exec.Command(gobin, append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

func TestLambdasLinkOnlyTheirJob(t *testing.T) {
	forbidden := map[string][]string{
		"api":         {"engine/flow", "engine/webui"},
		"signals":     {"engine/flow", "engine/webui", "engine/api"},
		"timetrigger": {"engine/flow", "engine/webui", "engine/api"},
		"archiver":    {"engine/flow", "engine/webui", "engine/api"},
	}
	for fn, banned := range forbidden {
		deps := goList(t, "-deps", module+"functions/"+fn)
		if !slices.Contains(deps, module+"engine/run") {
			t.Fatalf("functions/%s: go list -deps lacks engine/run; the check would pass vacuously: %v", fn, deps)
		}
		for _, d := range deps {
			for _, b := range banned {
				if d == module+b || strings.HasPrefix(d, module+b+"/") {
					t.Errorf("functions/%s links %s", fn, strings.TrimPrefix(d, module))
				}
			}
		}
	}
}
