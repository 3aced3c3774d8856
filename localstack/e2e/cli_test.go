package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/cli"
	"github.com/maestro-aws/maestro/localstack"
)

// scenarioCLI runs the README's commands (push, start, watch) and list
// against the deployed API: every request signed with SigV4 by the
// command line itself.
func scenarioCLI(t *testing.T, d *Deployment) {
	id := uniqueID("cli")
	def, err := json.Marshal(twoSteps(id, nil))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "wf.json")
	if err := os.WriteFile(file, def, 0o644); err != nil {
		t.Fatal(err)
	}
	maestro := func(args ...string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		root := cli.NewRoot(cli.Options{Stdout: &out, Stderr: &out, AWS: &d.AWS})
		code := cli.Run(ctx, root, append([]string{"--api", d.apiURL(t), "--sigv4", "--region", localstack.Region}, args...))
		return code, out.String()
	}
	if code, out := maestro("push", file); code != 0 || !strings.Contains(out, "pushed workflow "+id+" version 1") {
		t.Fatalf("push: %d %s", code, out)
	}
	if code, out := maestro("start", id); code != 0 || !strings.Contains(out, "started "+id+" instance 1 run 1") {
		t.Fatalf("start: %d %s", code, out)
	}
	if code, out := maestro("watch", id, "1", "--interval", "1s"); code != cli.ExitOK || !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("watch: exit %d\n%s", code, out)
	}
	code, out := maestro("list", id)
	if code != 0 || !regexp.MustCompile(`(?m)^1\s+1\s+1\s+SUCCEEDED .*MANUAL \(arn:`).MatchString(out) {
		t.Fatalf("list: %d\n%s", code, out)
	}
}
