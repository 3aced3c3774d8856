package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/maestro-aws/maestro/engine/awsconf"
	"github.com/maestro-aws/maestro/engine/health"
	"github.com/maestro-aws/maestro/localstack"
)

// Stack names and outputs the scenarios read (infra/app.go, infra/*.go).
const (
	stackAPI        = "MaestroApi"
	stackEvents     = "MaestroEvents"
	stackSignals    = "MaestroSignals"
	stackTriggers   = "MaestroTriggers"
	stackEngine     = "MaestroEngine"
	stackMonitoring = "MaestroMonitoring"
)

// Deployment is the whole app deployed into a private ministack, with the
// engine running as a local process against the test's PostgreSQL.
type Deployment struct {
	// Root is the repository root.
	Root string
	// Dir holds the run's logs, cdk.out and outputs (MAESTRO_E2E_DIR).
	Dir string
	// Emulator is the private ministack (TLS, IAM evaluated); Endpoint its
	// URL; AWS a config whose clients call it as the account's root.
	Emulator localstack.Private
	Endpoint string
	AWS      aws.Config
	// DatabaseURL is the PostgreSQL the master secret points at: empty
	// before the deploy, migrated by the deploy's migrate step.
	DatabaseURL string
	// Deployed is when `cdk deploy` finished.
	Deployed time.Time
	// Outputs are the stacks' outputs: stack name -> output key -> value.
	Outputs map[string]map[string]string
}

// Output returns a stack output, failing the test when it is missing.
func (d *Deployment) Output(t *testing.T, stack, key string) string {
	t.Helper()
	v, ok := d.Outputs[stack][key]
	if !ok {
		t.Fatalf("stack %s has no output %s (outputs: %v)", stack, key, d.Outputs[stack])
	}
	return v
}

// lambdaArch is the CDK architecture of packages built for this machine.
func lambdaArch() string {
	if runtime.GOARCH == "arm64" {
		return "arm64"
	}
	return "x86_64"
}

// deploy bootstraps and deploys every stack of the CDK app with
// -c maestro:target=emulator and starts the engine.
func deploy(t *testing.T) *Deployment {
	t.Helper()
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("MAESTRO_E2E_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("maestro-e2e-%d", os.Getuid()))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lambdaDir := os.Getenv("MAESTRO_E2E_LAMBDA_DIR")
	if lambdaDir == "" {
		lambdaDir = filepath.Join(root, "build", "e2e", "lambda")
	}
	if _, err := os.Stat(filepath.Join(lambdaDir, "api.zip")); err != nil {
		t.Fatalf("no Lambda packages in %s: run `make e2e`, which builds them for this machine (%v)", lambdaDir, err)
	}
	cdk := filepath.Join(root, "infra", ".cdk", "node_modules", ".bin", "cdk")
	if _, err := os.Stat(cdk); err != nil {
		t.Fatalf("the pinned CDK CLI is not installed: run `make e2e` (%v)", err)
	}

	d := &Deployment{Root: root, Dir: dir, DatabaseURL: emptyDatabase(t)}
	d.Emulator = localstack.StartPrivate(t, filepath.Join(dir, "ministack"))
	d.Endpoint, d.AWS = d.Emulator.URL, d.Emulator.Config(t)
	// This process's own HTTPS clients (the CLI's, the UI proxy's, the
	// signed API calls) trust the emulator's CA too: Go reads SSL_CERT_FILE
	// once, at its first certificate check, which is still to come.
	if err := os.Setenv("SSL_CERT_FILE", d.Emulator.CAFile); err != nil {
		t.Fatal(err)
	}
	t.Logf("emulator %s, state and logs in %s", d.Endpoint, dir)

	// The one context switch (infra/config.go Config.Target): what the
	// emulator cannot host is left out of the synthesized app.
	contextArgs := []string{
		"-c", "maestro:target=emulator",
		"-c", "maestro:emulatorDatabaseUrl=" + d.DatabaseURL,
		"-c", "maestro:lambdaDir=" + lambdaDir,
		"-c", "maestro:lambdaArchitecture=" + lambdaArch(),
		// The signals scenario's bucket and rules (signals_test.go).
		"-c", "maestro:s3SignalBuckets=" + signalBucket,
		"-c", "maestro:s3SignalRules=" + signalRules,
	}
	// The AWS job steps' targets (awsjobs_test.go).
	contextArgs = append(contextArgs, awsJobContext...)
	common := append([]string{"--no-notices", "--output", filepath.Join(dir, "cdk.out")}, contextArgs...)
	d.cdk(t, cdk, "bootstrap", append([]string{"aws://000000000000/" + localstack.Region}, common...)...)
	outputs := filepath.Join(dir, "outputs.json")
	d.cdk(t, cdk, "deploy", append([]string{"--all", "--require-approval", "never", "--concurrency", "4",
		"--outputs-file", outputs}, common...)...)
	raw, err := os.ReadFile(outputs)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &d.Outputs); err != nil {
		t.Fatalf("outputs %s: %v", raw, err)
	}
	d.Deployed = time.Now()
	// Before any engine runs: the deploy itself migrated the database.
	checkMigratedByDeploy(t, d.DatabaseURL)
	d.startEngine(t)
	return d
}

// awsEnv is the environment of a process that talks to the emulator.
func (d *Deployment) awsEnv() []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "MAESTRO_") {
			env = append(env, kv)
		}
	}
	return append(env, "AWS_ENDPOINT_URL="+d.Endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION="+localstack.Region, "AWS_DEFAULT_REGION="+localstack.Region,
		// The emulator's CA, for Go (SSL_CERT_FILE), the CDK CLI's SDK
		// (AWS_CA_BUNDLE) and Node itself.
		"SSL_CERT_FILE="+d.Emulator.CAFile, "AWS_CA_BUNDLE="+d.Emulator.CAFile, "NODE_EXTRA_CA_CERTS="+d.Emulator.CAFile)
}

// cdk runs the pinned CDK CLI from the repository root (cdk.json) against
// the emulator, logging to Dir/cdk-<command>.log.
func (d *Deployment) cdk(t *testing.T, bin, command string, args ...string) {
	t.Helper()
	logPath := filepath.Join(d.Dir, "cdk-"+command+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{command}, args...)...)
	cmd.Dir = d.Root
	cmd.Env = append(d.awsEnv(), "CDK_DISABLE_VERSION_CHECK=1", "CI=true")
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("cdk %s: %v\n%s", command, err, tail(log, 6000))
	}
	t.Logf("cdk %s took %s", command, time.Since(start).Round(time.Second))
}

// startEngine builds maestro and runs `maestro engine` as the ECS task
// would: with the environment the engine stack gives the task (its
// Environment output on the emulator target: the database secret, which it
// reads from the emulator's Secrets Manager, the event queue, the cluster
// name, ...), until the test ends. Only the health endpoint's address (a
// free port here) and the metrics period are the harness's own.
func (d *Deployment) startEngine(t *testing.T) {
	t.Helper()
	var taskEnv map[string]string
	if err := json.Unmarshal([]byte(d.Output(t, stackEngine, "Environment")), &taskEnv); err != nil {
		t.Fatalf("engine environment output: %v", err)
	}
	for _, k := range []string{"DB_SECRET_ARN", "MAESTRO_GROUP_COUNT", "MAESTRO_EVENT_QUEUE_URL", "MAESTRO_CLUSTER_NAME", "MAESTRO_PUBLIC_URL"} {
		if taskEnv[k] == "" {
			t.Fatalf("the engine stack gives no %s: %v", k, taskEnv)
		}
	}
	bin := filepath.Join(d.Dir, "maestro")
	build := exec.Command("go", "build", "-o", bin, "./cmd/maestro")
	build.Dir = d.Root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build maestro: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(d.Dir, "engine.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "engine")
	cmd.Env = d.awsEnv()
	for _, k := range slices.Sorted(maps.Keys(taskEnv)) {
		if k != "AWS_REGION" { // awsEnv sets the emulator's
			cmd.Env = append(cmd.Env, k+"="+taskEnv[k])
		}
	}
	cmd.Env = append(cmd.Env, "MAESTRO_HEALTH_ADDR="+addr, "MAESTRO_METRICS_INTERVAL=10s",
		awsconf.CallLogEnv+"="+d.Emulator.CallLog, awsconf.PrincipalEnv+"="+enginePrincipal)
	// As the task role, as on ECS: the emulator evaluates every call the
	// engine makes against that role's policies.
	cmd.Env = append(cmd.Env, d.assumeEngineRole(t)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := health.Probe(context.Background(), addr, 2*time.Second)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(d.Dir, "engine.log"))
			t.Fatalf("engine never became healthy: %v\n%s", err, tail(log, 4000))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// CallAPI sends a SigV4-signed request to the deployed REST API through the
// emulator's API Gateway, as the maestro CLI or any AWS client would.
func (d *Deployment) CallAPI(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return d.callAPI(t, method, path, body, true)
}

func (d *Deployment) callAPI(t *testing.T, method, path string, body any, sign bool) (int, map[string]any) {
	t.Helper()
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, d.apiURL(t)+path, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if sign {
		creds, err := d.AWS.Credentials.Retrieve(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(payload)
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]),
			"execute-api", localstack.Region, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if out == nil {
		// A JSON array (Maestro answers lists of steps so) is under "items".
		var list []any
		if json.Unmarshal(raw, &list) == nil && list != nil {
			return resp.StatusCode, map[string]any{"items": list}
		}
		out = map[string]any{"raw": string(raw)}
	}
	return resp.StatusCode, out
}

// apiURL is the stage's base URL on the emulator: the REST API id comes
// from the stack's ApiUrl output (https://{id}.execute-api.{region}...).
func (d *Deployment) apiURL(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(d.Output(t, stackAPI, "ApiUrl"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ := strings.Cut(u.Host, ".")
	return d.Endpoint + "/_aws/execute-api/" + id + strings.TrimSuffix(u.Path, "/")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; last seen %s", what, timeout, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// assumeEngineRole returns the environment of a session of the engine
// stack's task role (its TaskRoleArn output; the emulator target lets the
// account assume it), for the local maestro engine.
func (d *Deployment) assumeEngineRole(t *testing.T) []string {
	t.Helper()
	out, err := sts.NewFromConfig(d.AWS).AssumeRole(context.Background(), &sts.AssumeRoleInput{
		RoleArn:         aws.String(d.Output(t, stackEngine, "TaskRoleArn")),
		RoleSessionName: aws.String("maestro-engine-e2e"),
		DurationSeconds: aws.Int32(3600),
	})
	if err != nil {
		t.Fatalf("assume the engine task role: %v", err)
	}
	c := out.Credentials
	return []string{"AWS_ACCESS_KEY_ID=" + aws.ToString(c.AccessKeyId), "AWS_SECRET_ACCESS_KEY=" + aws.ToString(c.SecretAccessKey),
		"AWS_SESSION_TOKEN=" + aws.ToString(c.SessionToken)}
}
