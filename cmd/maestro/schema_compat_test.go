package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/migrations"
)

// appRoleURL creates a login that is a member of maestro_app (the role the
// engine and the functions log in as in AWS) and returns dsn with it as the
// user; the test cluster trusts local logins.
func appRoleURL(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "maestro_app_cmd_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE ROLE "+name+" LOGIN IN ROLE "+migrations.RoleApp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+name)
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(name)
	return u.String()
}

// runTwoSteps pushes a two-step workflow through the REST API at addr,
// starts it and waits for it to succeed.
func runTwoSteps(t *testing.T, addr, id string) {
	t.Helper()
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var in io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			in = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, "http://"+addr+path, in)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-maestro-user", "compat")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &out)
		if out == nil {
			out = map[string]any{"raw": string(raw)}
		}
		return resp.StatusCode, out
	}
	def := map[string]any{"workflow": map[string]any{"id": id, "steps": []any{
		map[string]any{"step": map[string]any{"id": "a", "type": "NoOp"}},
		map[string]any{"step": map[string]any{"id": "b", "type": "NoOp"}},
	}}}
	if code, out := call("POST", "/api/v3/workflows", def); code != 200 {
		t.Fatalf("push: %d %v", code, out)
	}
	if code, out := call("POST", "/api/v3/workflows/"+id+"/versions/latest/actions/start", map[string]any{"request_id": "compat-" + id}); code != 200 {
		t.Fatalf("start: %d %v", code, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out := call("GET", "/api/v3/workflows/"+id+"/instances/1", nil)
		if code == 200 && out["status"] == "SUCCEEDED" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run of %s: %d %v, want SUCCEEDED", id, code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The REST API, engine and trigger loop connected as the application role
// run a workflow end to end: nothing they do needs more than DML (and the
// start-up migration finds nothing to apply).
func TestDevAsTheAppRole(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"dev"}, "DATABASE_URL="+appRoleURL(t, dbtest.URL(t)))
	runTwoSteps(t, srv.addr, "least_privilege")
	srv.alive(t)
}

// previousRelease is the commit before the newest migration was added
// (MAESTRO_PREVIOUS_RELEASE overrides): the release that runs on the
// schema with that migration while the new one is rolled out.
func previousRelease(t *testing.T) string {
	t.Helper()
	if ref := os.Getenv("MAESTRO_PREVIOUS_RELEASE"); ref != "" {
		return ref
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: the previous release cannot be built")
	}
	out, err := exec.Command("git", "rev-parse", "--is-shallow-repository").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the previous release cannot be built", err)
	}
	if strings.TrimSpace(string(out)) == "true" {
		t.Skip("shallow clone: the previous release is not in the history (CI clones fully)")
	}
	files, err := filepath.Glob("../../migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	sort.Strings(files)
	newest := files[len(files)-1]
	// -m --first-parent: a migration that reached this branch in a merge
	// commit counts as added by that merge, whose first parent is the
	// release before it.
	added, err := exec.Command("git", "log", "-1", "--format=%H", "-m", "--first-parent", "--diff-filter=A", "--", newest).Output()
	if err != nil {
		t.Fatalf("git log %s: %v", newest, err)
	}
	if strings.TrimSpace(string(added)) == "" {
		// Not committed yet: the previous release is HEAD.
		return "HEAD"
	}
	return strings.TrimSpace(string(added)) + "^1"
}

// buildRelease builds cmd/maestro of ref from `git archive` in a temporary
// directory (Go's build cache makes a rebuild quick).
func buildRelease(t *testing.T, ref string) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", ref)
	archive.Dir = "../.."
	tarball, err := archive.Output()
	if err != nil {
		t.Fatalf("git archive %s: %v", ref, err)
	}
	tar := exec.Command("tar", "-x", "-C", dir)
	tar.Stdin = bytes.NewReader(tarball)
	if out, err := tar.CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v %s", ref, err, out)
	}
	bin := filepath.Join(dir, "maestro")
	build := exec.Command("go", "build", "-o", bin, "./cmd/maestro")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", ref, err, out)
	}
	return bin
}

// TestPreviousReleaseOnTheNewSchema holds expand-then-contract: the release
// before the newest migration, started on a database migrated by this tree
// (as the migrate step leaves it before the new code rolls out), pushes,
// starts and finishes a workflow through its REST API.
func TestPreviousReleaseOnTheNewSchema(t *testing.T) {
	t.Parallel()
	ref := previousRelease(t)
	began := time.Now()
	bin := buildRelease(t, ref)
	t.Logf("built %s in %s", ref, time.Since(began).Round(time.Millisecond))
	began = time.Now()
	srv := startServerBinary(t, bin, []string{"dev"}, "DATABASE_URL="+dbtest.URL(t))
	runTwoSteps(t, srv.addr, fmt.Sprintf("previous_release_%d", time.Now().UnixNano()))
	srv.alive(t)
	t.Logf("the previous release ran a workflow on the new schema in %s", time.Since(began).Round(time.Millisecond))
}
