package main

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"testing"
)

// Every alarm the monitoring stack defines has its runbook: a heading in
// docs/operations-runbooks.md that names it (in backquotes), saying what
// it means and what to do. A new alarm fails this test until it has one.
func TestEveryAlarmHasARunbook(t *testing.T) {
	f := loadFixture(t)
	raw, err := os.ReadFile("../docs/operations-runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := regexp.MustCompile("(?m)^#{3,4} .*$").FindAllString(string(raw), -1)
	named := map[string]bool{}
	word := regexp.MustCompile("`([A-Za-z0-9]+)`")
	for _, h := range headings {
		for _, m := range word.FindAllStringSubmatch(h, -1) {
			named[m[1]] = true
		}
	}
	ids := slices.Sorted(maps.Keys(f.stacks.Monitoring.Alarms))
	if len(ids) < 20 {
		t.Fatalf("only %d alarms in the monitoring stack: %v", len(ids), ids)
	}
	for _, id := range ids {
		if !named[id] {
			t.Errorf("alarm %s has no runbook heading in docs/operations-runbooks.md", id)
		}
	}
	t.Logf("%d alarms, each with its runbook", len(ids))
}
