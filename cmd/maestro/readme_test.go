package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The README's examples run in order without clashing (issue 27): the
// command-line block pushes as $USER and the curl blocks as the `user`
// header, so no workflow id may be pushed by both, nor by two callers.
func TestReadmeExamplesDoNotClash(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	pushedBy := map[string]string{} // workflow id -> caller
	push := func(id, caller string) {
		if prev, ok := pushedBy[id]; ok && prev != caller {
			t.Errorf("README pushes workflow %s as %s and as %s: the second gets 403", id, prev, caller)
		}
		pushedBy[id] = caller
	}
	for _, m := range regexp.MustCompile(`\./maestro push (\S+)`).FindAllStringSubmatch(string(readme), -1) {
		def, err := os.ReadFile("../../" + m[1])
		if err != nil {
			t.Fatal(err)
		}
		id := regexp.MustCompile(`(?m)^\s+id: (\S+)`).FindStringSubmatch(string(def))
		if id == nil {
			t.Fatalf("no id in %s", m[1])
		}
		push(id[1], "$USER")
	}
	curlPush := regexp.MustCompile(`curl -s -X POST \S+/api/v3/workflows -H 'user: (\w+)' -d '\{\s*"workflow": \{"id": "([^"]+)"`)
	found := curlPush.FindAllStringSubmatch(string(readme), -1)
	if len(found) < 2 || len(pushedBy) == 0 {
		t.Fatalf("found %d curl pushes and %d command-line pushes; has the README changed shape?", len(found), len(pushedBy))
	}
	for _, m := range found {
		push(m[2], m[1])
	}
}

// make run takes ADDR= or PORT= (issue 27: it was fixed to 127.0.0.1:8080).
func TestMakeRunTakesAddrAndPort(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	for args, want := range map[string]string{
		"":                  "dev --addr 127.0.0.1:8080",
		"ADDR=0.0.0.0:9090": "dev --addr 0.0.0.0:9090",
		"PORT=9091":         "dev --addr 127.0.0.1:9091",
	} {
		cmd := exec.Command("make", "-n", "-C", "../..", "run")
		if args != "" {
			cmd.Args = append(cmd.Args, args)
		}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PORT=") && !strings.HasPrefix(kv, "ADDR=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("make -n run %s: %v\n%s", args, err, out)
		}
	}
}
