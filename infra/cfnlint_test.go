package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// acceptedLintWarnings are the cfn-lint warnings the templates keep, each
// with why. Every other warning, and every error, fails TestCfnLint.
var acceptedLintWarnings = map[string]string{
	// The CDK writes an explicit DependsOn from a function to its role's
	// default policy, and the role is also referenced by GetAtt; the
	// repeated dependency is harmless and is the CDK's to drop.
	"W3005": "redundant DependsOn the CDK writes beside a Ref/GetAtt",
}

// cfnLintMatch is one finding of `cfn-lint --format json`.
type cfnLintMatch struct {
	Rule struct {
		ID string `json:"Id"`
	} `json:"Rule"`
	Level    string `json:"Level"`
	Message  string `json:"Message"`
	Filename string `json:"Filename"`
}

// TestCfnLint runs cfn-lint (PyPI, the version the Makefile pins, from
// MAESTRO_CFN_LINT, which `make test` sets) over every synthesized template
// of the default app and of the app with every context value set. Any error
// fails, and any warning not in acceptedLintWarnings. Without
// MAESTRO_CFN_LINT the test skips; with it set to a missing program it
// fails.
func TestCfnLint(t *testing.T) {
	bin := os.Getenv("MAESTRO_CFN_LINT")
	if bin == "" {
		t.Skip("MAESTRO_CFN_LINT is not set (make test installs cfn-lint and sets it)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("MAESTRO_CFN_LINT=%s: %v", bin, err)
	}
	for name, f := range map[string]*fixture{"default": loadFixture(t), "all context": loadAllContextFixture(t)} {
		t.Run(name, func(t *testing.T) {
			templates, err := filepath.Glob(filepath.Join(f.outdir, "*.template.json"))
			if err != nil || len(templates) != len(f.all()) {
				t.Fatalf("templates %v (%v), want one per stack (%d)", templates, err, len(f.all()))
			}
			args := append([]string{"--format", "json"}, templates...)
			out, err := exec.Command(bin, args...).Output()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatalf("run cfn-lint: %v", err)
			}
			var matches []cfnLintMatch
			if err := json.Unmarshal(out, &matches); err != nil {
				t.Fatalf("cfn-lint output: %v\n%s\n%s", err, out, stderrOf(err))
			}
			for _, m := range matches {
				if m.Level == "Warning" && acceptedLintWarnings[m.Rule.ID] != "" || m.Level == "Informational" {
					continue
				}
				t.Errorf("%s %s %s: %s", filepath.Base(m.Filename), m.Level, m.Rule.ID, m.Message)
			}
		})
	}
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}
