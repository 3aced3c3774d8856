package api_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/stepruntime"
)

// sdkVersion is the release of Maestro's Python SDK (PyPI maestro-sdk)
// the test drives this API with.
const sdkVersion = "0.1.4"

// pipOffline reports whether pip's output says it could not reach the
// package index (the only reason the SDK test skips).
func pipOffline(out string) bool {
	for _, s := range []string{"NewConnectionError", "Temporary failure in name resolution",
		"Failed to establish a new connection", "Network is unreachable", "No route to host",
		"ConnectTimeoutError", "ReadTimeoutError", "ProxyError"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// sdkPython installs maestro-sdk into a virtual environment under the
// test's temporary directory and returns its python, or skips when pip
// cannot reach the package index.
func sdkPython(t *testing.T) string {
	t.Helper()
	// The SDK's command line (its watch module) needs Python 3.12 or
	// later although the package says 3.10; its library runs on 3.10.
	var python string
	for _, name := range []string{"python3.13", "python3.12", "python3"} {
		if p, err := exec.LookPath(name); err == nil && exec.Command(p, "-c", "import sys; assert sys.version_info >= (3, 10)").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Fatal("Python 3.10 or later (python3) is needed to run Maestro's Python SDK")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(python, "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pip := exec.CommandContext(ctx, filepath.Join(venv, "bin", "pip"), "install", "--quiet",
		"--disable-pip-version-check", "--retries", "1", "--timeout", "20", "maestro-sdk=="+sdkVersion)
	if out, err := pip.CombinedOutput(); err != nil {
		if pipOffline(string(out)) {
			t.Skipf("pip cannot reach the package index to install maestro-sdk %s: %s", sdkVersion, out)
		}
		t.Fatalf("pip install maestro-sdk==%s: %v\n%s", sdkVersion, err, out)
	}
	return filepath.Join(venv, "bin", "python")
}

// sdkScript drives the API with maestro-sdk as a Maestro user would: it
// builds a workflow with the SDK's Python DSL, validates and pushes it
// with MaestroClient, starts it with run params, polls the instance until
// it ends and reads the definition and a step instance back. It also
// pushes the YAML with the SDK's command line (`maestro push`) and stops
// a running instance with client.stop. It prints one JSON object with what
// it saw.
const sdkScript = `
import json, subprocess, sys, time
from maestro import Workflow, Job, MaestroClient

base_url, user, yaml_path, cli = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
client = MaestroClient(base_url=base_url, user=user)

wf = Workflow(id="sdk-wf")
wf.owner(user).tags("sdk").description("driven by maestro-sdk")
wf.param("greeting", "hello").param_expr("shout", "greeting + ' world'")
job1 = Job(id="job1", type="NoOp").param("n", 3).transition("job2")
job2 = Job(id="job2", type="Sleep").param("sleep_seconds", 1).param_expr("doubled", "n * 2")
job2.param("n", 5)
wf.jobs(job1, job2)
wf_yaml = wf.to_yaml(yaml_path)

out = {}
out["validate"] = client.validate_yaml(wf_yaml)
out["push"] = client.push_yaml(wf_yaml)
if sys.version_info >= (3, 12):
    out["cli_push"] = json.loads(subprocess.run(
        [cli, "--base-url", base_url, "--user", user, "push", yaml_path],
        check=True, capture_output=True, text=True).stdout)
out["start"] = client.start(workflow_id="sdk-wf", version="latest",
                            run_params={"greeting": {"value": "hi", "type": "STRING"}})
deadline = time.time() + 90
while True:
    inst = client.get_instance("sdk-wf", 1)
    if inst.get("status") in ("SUCCEEDED", "FAILED", "STOPPED", "TIMED_OUT") or time.time() > deadline:
        break
    time.sleep(0.2)
out["instance"] = inst
out["run"] = client.get_instance("sdk-wf", 1, run_id=1)
out["step"] = client.get_instance("sdk-wf", 1, step_id="job2")
out["attempt"] = client.get_instance("sdk-wf", 1, run_id=1, step_id="job2", attempt_id=1)
out["workflow"] = client.get_workflow("sdk-wf", version="latest", enriched=True)
out["missing"] = client.get_instance("sdk-wf", 99)

nap = Workflow(id="sdk-stop")
nap.owner(user).job(Job(id="nap", type="Sleep").param("sleep_seconds", 600))
client.push_yaml(nap.to_yaml())
client.start(workflow_id="sdk-stop")
deadline = time.time() + 60
while client.get_instance("sdk-stop", 1).get("status") != "IN_PROGRESS" and time.time() < deadline:
    time.sleep(0.2)
out["stop"] = client.stop(workflow_id="sdk-stop", instance_id=1)
deadline = time.time() + 60
while True:
    stopped = client.get_instance("sdk-stop", 1)
    if stopped.get("status") in ("SUCCEEDED", "FAILED", "STOPPED", "TIMED_OUT") or time.time() > deadline:
        break
    time.sleep(0.2)
out["stopped"] = stopped
print(json.dumps(out))
`

// TestMaestroPythonSDK runs Maestro's own Python SDK (maestro-sdk 0.1.4
// from PyPI) against this API and an engine: push, validate, start, read
// the run until SUCCEEDED, read the definition and steps back, and stop a
// running instance.
func TestMaestroPythonSDK(t *testing.T) {
	python := sdkPython(t)
	e := newTestServer(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	eng, err := flow.New(e.pool, flow.Config{Logger: discardLogger(), Lease: 2 * time.Second, Runtimes: stepruntime.Builtins()})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)

	dir := t.TempDir()
	script := filepath.Join(dir, "sdk_e2e.py")
	if err := os.WriteFile(script, []byte(sdkScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(filepath.Dir(python), "maestro")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script, srv.URL, "sdk-user", filepath.Join(dir, "sdk-wf.yaml"), cli)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("SDK script: %v\n%s", err, stderr.String())
	}
	var out map[string]map[string]any
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("SDK script output is not one JSON object: %v\n%s", err, stdout)
	}

	// Maestro answers a valid definition with an ACTION timeline event.
	if out["validate"]["type"] != "ACTION" {
		t.Errorf("validate answered %v, want an ACTION timeline event", out["validate"])
	}
	wd, _ := out["push"]["workflow_definition"].(map[string]any)
	if wd == nil || wd["workflow"].(map[string]any)["id"] != "sdk-wf" {
		t.Fatalf("push answered %v", out["push"])
	}
	if v := wd["metadata"].(map[string]any)["workflow_version_id"]; v != float64(1) {
		t.Errorf("push made version %v, want 1", v)
	}
	if cliPush, ran := out["cli_push"]; !ran {
		t.Log("the SDK's command line was not run: it needs Python 3.12 or later")
	} else if _, ok := cliPush["workflow_definition"].(map[string]any); !ok {
		t.Errorf("maestro push (the SDK's CLI) answered %v", cliPush)
	}
	if out["start"]["status"] != "CREATED" || out["start"]["workflow_instance_id"] != float64(1) {
		t.Fatalf("start answered %v", out["start"])
	}
	inst := out["instance"]
	if inst["status"] != "SUCCEEDED" {
		t.Fatalf("instance ended %v, want SUCCEEDED: %v", inst["status"], inst)
	}
	params, _ := inst["params"].(map[string]any)
	shout, _ := params["shout"].(map[string]any)
	if shout["evaluated_result"] != "hi world" {
		t.Errorf("param shout = %v, want the run param greeting bound into it (hi world)", shout)
	}
	if out["run"]["workflow_run_id"] != float64(1) || out["run"]["status"] != "SUCCEEDED" {
		t.Errorf("run 1: %v", out["run"])
	}
	for _, k := range []string{"step", "attempt"} {
		st := out[k]
		rs, _ := st["runtime_state"].(map[string]any)
		if st["step_id"] != "job2" || rs["status"] != "SUCCEEDED" {
			t.Errorf("%s: step_id %v status %v, want job2 SUCCEEDED", k, st["step_id"], rs["status"])
		}
		sp, _ := st["params"].(map[string]any)
		doubled, _ := sp["doubled"].(map[string]any)
		// An untyped `!name` expression of the YAML DSL is a STRING param.
		if doubled["evaluated_result"] != "10" || doubled["type"] != "STRING" {
			t.Errorf("%s: param doubled = %v, want the STRING \"10\"", k, doubled)
		}
	}
	if w, _ := out["workflow"]["workflow"].(map[string]any); w == nil || w["id"] != "sdk-wf" {
		t.Errorf("get_workflow answered %v", out["workflow"])
	}
	if out["stopped"]["status"] != "STOPPED" {
		t.Errorf("a run the SDK stopped (client.stop) ended %v, want STOPPED; stop answered %v", out["stopped"]["status"], out["stop"])
	}
	if out["missing"]["status"] != "NOT_FOUND" {
		t.Errorf("an instance that does not exist answered %v, want status NOT_FOUND (what the SDK's watch looks for)", out["missing"])
	}
}
