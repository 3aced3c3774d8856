package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/cli"
	"github.com/maestro-aws/maestro/engine/client"
	"github.com/maestro-aws/maestro/engine/dbtest"
)

// maestroCLI runs the command line in-process against api and returns its
// exit code and output.
func maestroCLI(t *testing.T, api string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := run(ctx, append([]string{"--api", api, "--user", "alice"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCLIReadmeFlow is the README's first run: push examples/hello.yaml,
// start it, watch it to the end (exit 0), then read it back as tables and
// as JSON.
func TestCLIReadmeFlow(t *testing.T) {
	t.Parallel()
	api := "http://" + startServer(t, []string{"dev"}, "DATABASE_URL="+dbtest.URL(t)).addr

	code, out, errOut := maestroCLI(t, api, "push", "../../examples/hello.yaml")
	if code != 0 || !strings.Contains(out, "pushed workflow hello version 1 (active)") {
		t.Fatalf("push: %d %q %q", code, out, errOut)
	}
	code, out, _ = maestroCLI(t, api, "push", "../../examples/hello.yaml")
	if code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("second push: %d %q", code, out)
	}
	code, out, errOut = maestroCLI(t, api, "start", "hello")
	if code != 0 || !strings.Contains(out, "started hello instance 1 run 1 (CREATED)") {
		t.Fatalf("start: %d %q %q", code, out, errOut)
	}
	code, out, errOut = maestroCLI(t, api, "watch", "hello", "1", "--interval", "200ms")
	if code != cli.ExitOK {
		t.Fatalf("watch exited %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"hello instance 1 run 1  IN_PROGRESS", "step greet", "SUCCEEDED", "leaf steps [####", "13/13 done",
		"foreach of 10 iterations succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("watch output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colours written to a pipe:\n%q", out)
	}

	// Run params typed from -p: day > 20240101 takes the other branch.
	code, out, errOut = maestroCLI(t, api, "start", "hello", "-p", "day=20240105", "--watch")
	if code != 0 {
		t.Fatalf("start --watch: %d %q %q", code, out, errOut)
	}
	code, out, _ = maestroCLI(t, api, "get", "hello", "2")
	if code != 0 || !regexpLine(out, `late\s+NoOp\s+1\s+SUCCEEDED`) || !regexpLine(out, `each_day\s+foreach\s+1\s+UNSATISFIED`) {
		t.Fatalf("get hello 2: %d\n%s", code, out)
	}

	code, out, _ = maestroCLI(t, api, "list", "hello")
	if code != 0 || !regexpLine(out, `^2\s+1\s+1\s+SUCCEEDED .*MANUAL \(alice\)`) || !regexpLine(out, `^1\s+1\s+1\s+SUCCEEDED`) {
		t.Fatalf("list hello: %d\n%s", code, out)
	}
	code, out, _ = maestroCLI(t, api, "-o", "json", "get", "hello", "1")
	var got struct {
		Instance map[string]any  `json:"workflow_instance"`
		Steps    json.RawMessage `json:"steps"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Instance["status"] != "SUCCEEDED" {
		t.Fatalf("get -o json: %d\n%s", code, out)
	}
	code, out, _ = maestroCLI(t, api, "timeline", "hello", "1")
	if code != 0 || !regexpLine(out, `workflow\s+STATUS\s+IN_PROGRESS`) || !regexpLine(out, `wait\s+STATUS\s+RUNNING`) {
		t.Fatalf("timeline: %d\n%s", code, out)
	}
	code, out, _ = maestroCLI(t, api, "get", "hello")
	if code != 0 || !strings.Contains(out, "active version:  1") || !strings.Contains(out, "steps:           4") {
		t.Fatalf("get hello: %d\n%s", code, out)
	}

	// Restart from a step: a new run, watched to its end.
	code, out, errOut = maestroCLI(t, api, "restart", "hello", "1", "--from-step", "wait", "--watch")
	if code != 0 || !strings.Contains(out, "restarted hello instance 1 as run 2") {
		t.Fatalf("restart: %d %q %q", code, out, errOut)
	}

	code, out, _ = maestroCLI(t, api, "trigger", "preview", "0 9 * * MON-FRI", "--timezone", "Europe/Paris", "-n", "2",
		"--after", "2024-01-05T12:00:00Z")
	if code != 0 || !strings.Contains(out, "2024-01-08T09:00:00+01:00") || !strings.Contains(out, "2024-01-09T09:00:00+01:00") {
		t.Fatalf("trigger preview: %d\n%s", code, out)
	}
	code, out, _ = maestroCLI(t, api, "signal", "send", "table_ready", "-p", "table=db.orders", "--request-id", "r1")
	if code != 0 || !strings.Contains(out, "signal table_ready announced") {
		t.Fatalf("signal send: %d\n%s", code, out)
	}
	code, out, _ = maestroCLI(t, api, "signal", "send", "table_ready", "-p", "table=db.orders", "--request-id", "r1")
	if code != 0 || !strings.Contains(out, "already announced") {
		t.Fatalf("signal send again: %d\n%s", code, out)
	}
	code, out, _ = maestroCLI(t, api, "events", "tail", "--follow=false", "--workflow", "hello", "--type", "WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT")
	if code != 0 || !regexpLine(out, `WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT\s+hello #1/1 IN_PROGRESS -> SUCCEEDED`) {
		t.Fatalf("events tail: %d\n%s", code, out)
	}
}

// TestCLIWatchExitCodes: watch exits with the code of the run's final
// status (12 STOPPED, 10 FAILED after a kill); bad input is a clear error.
func TestCLIWatchExitCodes(t *testing.T) {
	t.Parallel()
	api := "http://" + startServer(t, []string{"dev"}, "DATABASE_URL="+dbtest.URL(t)).addr
	dir := t.TempDir()
	def := filepath.Join(dir, "slow.json")
	if err := os.WriteFile(def, []byte(`{"workflow": {"id": "slow", "steps": [{"step": {"id": "nap", "type": "Sleep", "sleep_seconds": 600}}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := maestroCLI(t, api, "push", def); code != 0 {
		t.Fatalf("push: %s%s", out, errOut)
	}
	c, err := client.New(client.Options{BaseURL: api, User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		action string
		code   int
	}{{"stop", cli.ExitStopped}, {"kill", cli.ExitFailed}} {
		iid := int64(i + 1)
		if code, out, errOut := maestroCLI(t, api, "start", "slow"); code != 0 {
			t.Fatalf("start: %s%s", out, errOut)
		}
		waitUntil(t, time.Minute, "the sleep step running", func() bool {
			steps, _, err := c.Steps(context.Background(), "slow", iid, 1)
			return err == nil && len(steps) == 1 && steps[0].Status == "RUNNING"
		})
		if code, out, errOut := maestroCLI(t, api, tc.action, "slow", itoa(iid)); code != 0 || !strings.Contains(out, "accepted") {
			t.Fatalf("%s: %d %s%s", tc.action, code, out, errOut)
		}
		code, out, errOut := maestroCLI(t, api, "watch", "slow", itoa(iid), "--interval", "200ms")
		if code != tc.code {
			t.Errorf("watch after %s exited %d, want %d:\n%s%s", tc.action, code, tc.code, out, errOut)
		}
	}

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"watch", "slow", "x"}, cli.ExitUsage, "instance must be a positive number"},
		{[]string{"watch", "slow"}, cli.ExitUsage, "accepts 2 arg(s)"},
		{[]string{"start", "nope"}, cli.ExitError, "404 NOT_FOUND"},
		{[]string{"start", "slow", "-p", "novalue"}, cli.ExitUsage, `param "novalue" is not name=value`},
		{[]string{"push", filepath.Join(dir, "missing.json")}, cli.ExitError, "read "},
		{[]string{"-o", "yaml", "list", "slow"}, cli.ExitUsage, "--output must be table or json"},
		{[]string{"frobnicate"}, cli.ExitUsage, "unknown command"},
	} {
		code, out, errOut := maestroCLI(t, api, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("maestro %v: exit %d, stderr %q (stdout %q); want %d and %q", tc.args, code, errOut, out, tc.code, tc.msg)
		}
	}
	// A definition the API refuses: its problems are listed.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"workflow": {"id": "bad", "steps": [{"step": {"id": "a", "type": "NoOp", "transition": {"successors": {"zz": "true"}}}}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := maestroCLI(t, api, "push", "--validate", bad)
	if code != cli.ExitError || !strings.Contains(errOut, "400") || !strings.Contains(errOut, "zz") {
		t.Errorf("push --validate of a bad definition: %d %q", code, errOut)
	}
}

// TestCLIHelpAndCompletion: every command has help; completion scripts are
// generated for the usual shells.
func TestCLIHelpAndCompletion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"push", "--help"}, {"watch", "--help"}, {"signal", "send", "--help"},
		{"events", "tail", "--help"}, {"trigger", "preview", "--help"}, {"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 0 || out.Len() < 200 {
			t.Errorf("maestro %v: exit %d, %d bytes: %s", args, code, out.Len(), errOut.String())
		}
	}
	var out bytes.Buffer
	run(context.Background(), []string{"--help"}, &out, &out)
	for _, cmd := range []string{"push", "start", "list", "get", "watch", "timeline", "restart", "stop", "kill", "signal", "events", "trigger",
		"dev", "engine", "migrate", "sel", "localpg", "completion"} {
		if !regexpLine(out.String(), `^\s+`+cmd+`\s`) {
			t.Errorf("maestro --help does not list %s:\n%s", cmd, out.String())
		}
	}
	out.Reset()
	run(context.Background(), []string{"watch", "--help"}, &out, &out)
	if !strings.Contains(out.String(), "10 FAILED") {
		t.Errorf("watch --help does not document its exit codes:\n%s", out.String())
	}
}

// TestEveryCommandHelp: every command and subcommand, the server ones
// included, answers --help (and -h) on stdout with what it does and exits
// 0 (issue 27: dev --help exited 2, migrate --help printed only "Usage of
// migrate:", localpg --help "no cluster in .maestro/pg").
func TestEveryCommandHelp(t *testing.T) {
	t.Parallel()
	root := cli.NewRoot(cli.Options{Stdout: io.Discard, Stderr: io.Discard})
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			p := append(slices.Clone(path), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	walk(root, nil)
	for _, sc := range serverCommands {
		paths = append(paths, []string{sc.name})
	}
	for _, p := range paths {
		for _, flag := range []string{"--help", "-h"} {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(slices.Clone(p), flag), &out, &errOut)
			text := out.String()
			if code != 0 || len(text) < 60 || !strings.Contains(text, p[len(p)-1]) {
				t.Errorf("maestro %s %s: exit %d, stdout %q, stderr %q", strings.Join(p, " "), flag, code, text, errOut.String())
			}
		}
	}
	for _, sc := range serverCommands {
		var out bytes.Buffer
		run(context.Background(), []string{sc.name, "--help"}, &out, io.Discard)
		if !strings.Contains(out.String(), sc.short) || (len(sc.env) > 0 && !strings.Contains(out.String(), "Environment:")) {
			t.Errorf("maestro %s --help lacks its description or environment:\n%s", sc.name, out.String())
		}
	}
}

// regexpLine reports whether a line of out matches pattern.
func regexpLine(out, pattern string) bool {
	return regexp.MustCompile(`(?m)` + pattern).MatchString(out)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
