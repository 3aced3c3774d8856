package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The stack tests share one App, synthesized once, built by NewMaestro from
// the repository's cdk.json context exactly as main builds it, but with
// stand-in assets: a directory holding a dummy bootstrap for the Lambda and
// a directory holding a Dockerfile for the engine image. Nothing is built,
// no AWS account or Docker engine is needed.

// testRoot holds the fixture's temporary directories; TestMain removes it.
var testRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "maestro-infra-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testRoot = dir
	code := m.Run()
	if !raceDetector {
		// Under -race jsii.Close is skipped: in jsii-runtime-go v1.139.0 it
		// waits on the node child concurrently with the runtime's own Wait
		// goroutine, which the race detector reports. The child exits anyway
		// when this process ends; only the runtime's unpacked copy (about
		// 2 MB in $TMPDIR/jsii-runtime.*) is left behind.
		jsii.Close()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// fixture is a synthesized app.
type fixture struct {
	cfg    Config
	stacks *Stacks
	outdir string

	network, data, events, signals, triggers, archive, engine, api, monitoring *stackTemplate
}

// stackTemplate is one stack's synthesized template, both as the assertions
// API sees it and as plain Go values for checks easier written in Go.
type stackTemplate struct {
	assertions.Template
	stack awscdk.Stack
	// Resources maps logical id to the resource (Type, Properties, ...).
	Resources map[string]map[string]any
}

var (
	fixtureOnce sync.Once
	sharedFix   *fixture
	fixtureErr  error

	emulatorOnce sync.Once
	emulatorFix  *fixture
	emulatorErr  error

	allContextOnce sync.Once
	allContextFix  *fixture
	allContextErr  error
)

// loadFixture returns the shared app of the aws target, as cdk.json
// configures it, with cdk-nag's AwsSolutions and ServerlessChecks packs
// applied; it is built on first use.
func loadFixture(t *testing.T) *fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		sharedFix, fixtureErr = buildFixture("aws", nil, true)
	})
	if fixtureErr != nil {
		t.Fatalf("build app: %v", fixtureErr)
	}
	return sharedFix
}

// emulatorDatabaseURL is the database the emulator fixture points at.
const emulatorDatabaseURL = "postgres://maestro:secret@127.0.0.1:54329/maestro_e2e"

// loadEmulatorFixture returns the app as `make e2e` synthesizes it: the
// emulator target, x86_64 packages.
func loadEmulatorFixture(t *testing.T) *fixture {
	t.Helper()
	emulatorOnce.Do(func() {
		emulatorFix, emulatorErr = buildFixture("emulator", map[string]any{
			ContextPrefix + "target":              TargetEmulator,
			ContextPrefix + "emulatorDatabaseUrl": emulatorDatabaseURL,
			ContextPrefix + "lambdaArchitecture":  "x86_64",
		}, false)
	})
	if emulatorErr != nil {
		t.Fatalf("build emulator app: %v", emulatorErr)
	}
	return emulatorFix
}

// allContext sets every documented context key to a value other than its
// default, each as the plain string `cdk synth -c key=value` passes (lists
// comma-separated, JSON as text). stepEcsSubnets and stepEcsSecurityGroups
// stay unset on purpose: set, they replace the step tasks' security group,
// the resource whose description once broke this variant
// (TestEngineStepEnvironment covers them set).
var allContext = map[string]any{
	ContextPrefix + "stage":                          "qa",
	ContextPrefix + "dbMinCapacity":                  "1",
	ContextPrefix + "dbMaxCapacity":                  "8",
	ContextPrefix + "dbReaders":                      "1",
	ContextPrefix + "dbDeletionProtection":           "false",
	ContextPrefix + "dbRemovalPolicy":                "destroy",
	ContextPrefix + "dbProxy":                        "true",
	ContextPrefix + "dbProxyMaxConnectionsPercent":   "40",
	ContextPrefix + "dbSecretRotationDays":           "7",
	ContextPrefix + "groupCount":                     "32",
	ContextPrefix + "engineDesiredCount":             "3",
	ContextPrefix + "engineCpu":                      "1024",
	ContextPrefix + "engineMemoryMiB":                "2048",
	ContextPrefix + "engineMaxCount":                 "8",
	ContextPrefix + "engineScaleQueueAgeSeconds":     "45",
	ContextPrefix + "lambdaArchitecture":             "x86_64",
	ContextPrefix + "apiThrottlingRateLimit":         "50",
	ContextPrefix + "apiThrottlingBurstLimit":        "80",
	ContextPrefix + "apiCloudWatchRole":              "false",
	ContextPrefix + "admins":                         "arn:aws:iam::123456789012:role/maestro-admin",
	ContextPrefix + "apiReservedConcurrency":         "10",
	ContextPrefix + "signalsReservedConcurrency":     "4",
	ContextPrefix + "publisherReservedConcurrency":   "3",
	ContextPrefix + "timetriggerReservedConcurrency": "0",
	ContextPrefix + "s3SignalBuckets":                "landing-bucket,archive-bucket",
	ContextPrefix + "s3SignalRules":                  `[{"bucket":"landing-bucket","prefix":"in/","signal":"landed"}]`,
	ContextPrefix + "exampleSubscriberFilter":        `{"status":["FAILED"]}`,
	ContextPrefix + "tableChangeGlueDatabases":       "sales",
	ContextPrefix + "tableChangeTableBuckets":        "arn:aws:s3tables:us-east-1:123456789012:bucket/lake",
	ContextPrefix + "icebergCatalogUri":              "https://s3tables.us-east-1.amazonaws.com/iceberg",
	ContextPrefix + "icebergWarehouse":               "arn:aws:s3tables:us-east-1:123456789012:bucket/lake",
	ContextPrefix + "icebergManifestLocation":        "s3://lake-manifests/incremental/",
	ContextPrefix + "alarmEmail":                     "oncall@example.com",
	ContextPrefix + "logRetentionDays":               "14",
	ContextPrefix + "stepLambdaFunctions":            "etl-load,arn:aws:lambda:us-east-1:123456789012:function:score",
	ContextPrefix + "stepEcsClusters":                "my-cluster",
	ContextPrefix + "stepEcsTaskDefinitions":         "trainer,scorer:4",
	ContextPrefix + "stepPassRoles":                  "trainer-task-role",
	ContextPrefix + "stepHttpAllowedHosts":           "api.example.com,*.example.org",
	ContextPrefix + "stepAthenaWorkgroups":           "analytics",
	ContextPrefix + "stepAthenaOutputLocations":      "s3://athena-results/maestro/",
	ContextPrefix + "stepAthenaDataLocations":        "s3://lake/events/",
	ContextPrefix + "stepAthenaDatabases":            "events",
	ContextPrefix + "stepGlueJobs":                   "nightly-load",
	ContextPrefix + "stepStateMachines":              "publish",
	ContextPrefix + "stepBatchJobQueues":             "etl-queue",
	ContextPrefix + "stepBatchJobDefinitions":        "etl,papermill:2",
	ContextPrefix + "stepEmrClusters":                "j-1ABCDEFGHIJKL",
	ContextPrefix + "stepNotebookCarrier":            "Batch",
	ContextPrefix + "stepNotebookDefinition":         "papermill:2",
	ContextPrefix + "stepNotebookOutputPrefix":       "s3://notebooks-bucket/out/",
	ContextPrefix + "clusterName":                    "qa-cluster",
	ContextPrefix + "publicUrl":                      "https://maestro.example.com/",
	ContextPrefix + "natGateways":                    "1",
	ContextPrefix + "vpcEndpoints":                   "true",
	ContextPrefix + "otlpEndpoint":                   "https://xray.us-east-1.amazonaws.com/v1/traces",
}

// loadAllContextFixture returns the app with every context value set
// (allContext), with both cdk-nag packs applied.
func loadAllContextFixture(t *testing.T) *fixture {
	t.Helper()
	allContextOnce.Do(func() {
		allContextFix, allContextErr = buildFixture("all-context", allContext, true)
	})
	if allContextErr != nil {
		t.Fatalf("build app with every context value: %v", allContextErr)
	}
	return allContextFix
}

func buildFixture(name string, extra map[string]any, nag bool) (f *fixture, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	ctx, err := cdkJSONContext()
	if err != nil {
		return nil, err
	}
	maps.Copy(ctx, extra)
	outdir := filepath.Join(testRoot, name, "cdk.out")
	app := awscdk.NewApp(&awscdk.AppProps{
		Context: &ctx,
		Outdir:  jsii.String(outdir),
	})
	cfg, err := ConfigFromContext(NodeContext(app.Node()))
	if err != nil {
		return nil, err
	}
	// Every function, so that the stacks are tested with the functions that
	// have not landed yet too.
	assets := Assets{Functions: map[string]awslambda.Code{}}
	for _, fn := range append(slices.Clone(AllFunctions), FunctionMigrate) {
		if assets.Functions[fn], err = dummyLambdaCode(filepath.Join(testRoot, name, "lambda", fn)); err != nil {
			return nil, err
		}
	}
	if cfg.Target == TargetAWS {
		imageDir, err := dummyImageContext(filepath.Join(testRoot, name, "image"))
		if err != nil {
			return nil, err
		}
		assets.EngineImage = EngineImageFromDir(imageDir)
	}
	stacks, err := NewMaestro(app, cfg, assets)
	if err != nil {
		return nil, err
	}
	if nag {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		awscdk.Aspects_Of(app).Add(cdknag.NewServerlessChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	app.Synth(nil)

	f = &fixture{cfg: cfg, stacks: stacks, outdir: outdir}
	for _, s := range f.all() {
		if s.stack == nil {
			continue
		}
		if *s.dst, err = newStackTemplate(s.stack); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// stackRef pairs a stack with the fixture field holding its template.
type stackRef struct {
	dst   **stackTemplate
	stack awscdk.Stack
}

// all lists the app's stacks; the engine's is nil on the emulator target.
func (f *fixture) all() []stackRef {
	st := f.stacks
	refs := []stackRef{
		{&f.network, st.Network.Stack},
		{&f.data, st.Data.Stack},
		{&f.events, st.Events.Stack},
		{&f.signals, st.Signals.Stack},
		{&f.triggers, st.Triggers.Stack},
		{&f.archive, st.Archive.Stack},
		{&f.api, st.API.Stack},
		{&f.monitoring, st.Monitoring.Stack},
	}
	if st.Engine != nil {
		refs = append(refs, stackRef{&f.engine, st.Engine.Stack})
	}
	return refs
}

func newStackTemplate(stack awscdk.Stack) (*stackTemplate, error) {
	tmpl := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		return nil, fmt.Errorf("%s template: %w", *stack.StackName(), err)
	}
	var doc struct {
		Resources map[string]map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s template: %w", *stack.StackName(), err)
	}
	return &stackTemplate{Template: tmpl, stack: stack, Resources: doc.Resources}, nil
}

// cdkJSONContext reads the context of the repository's cdk.json so that the
// tests see the same feature flags and defaults as `cdk synth`.
func cdkJSONContext() (map[string]any, error) {
	raw, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		return nil, fmt.Errorf("read cdk.json: %w", err)
	}
	var doc struct {
		App     string         `json:"app"`
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse cdk.json: %w", err)
	}
	return doc.Context, nil
}

// dummyLambdaCode stands in for build/lambda/<name>.zip.
func dummyLambdaCode(dir string) (awslambda.Code, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		return nil, err
	}
	return awslambda.Code_FromAsset(jsii.String(dir), nil), nil
}

// dummyImageContext makes a build context with a Dockerfile, a source file
// and files under every excluded path, to check that staging drops them.
func dummyImageContext(dir string) (string, error) {
	files := map[string]string{
		"Dockerfile":       "FROM scratch\n",
		"go.mod":           "module example.com/x\n",
		"cmd/maestro/x.go": "package main\n",
	}
	for _, ex := range ImageExcludes {
		files[filepath.Join(ex, "excluded")] = "x"
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// check runs f, turning a failed assertion (a panic from jsii) into a test
// error instead of a crash of the whole test binary.
func check(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	f()
}

// ofType returns the resources of type typ, by logical id.
func (s *stackTemplate) ofType(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.Resources {
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

// one returns the only resource of type typ, failing the test otherwise.
func (s *stackTemplate) one(t *testing.T, typ string) (string, map[string]any) {
	t.Helper()
	rs := s.ofType(typ)
	if len(rs) != 1 {
		t.Fatalf("%s: want 1 %s, got %d", *s.stack.StackName(), typ, len(rs))
	}
	for id, r := range rs {
		return id, props(r)
	}
	panic("unreachable")
}

// logicalID is the logical id of the construct at path (relative to stack)
// in stack's template.
func logicalID(t *testing.T, stack awscdk.Stack, path ...string) string {
	t.Helper()
	var node = stack.Node()
	for _, p := range path {
		child := node.TryFindChild(jsii.String(p))
		if child == nil {
			t.Fatalf("%s: no construct %q under %s", *stack.StackName(), p, *node.Path())
		}
		node = child.Node()
	}
	el, ok := node.DefaultChild().(awscdk.CfnElement)
	if !ok {
		t.Fatalf("%s: %s has no CloudFormation resource", *stack.StackName(), *node.Path())
	}
	return *stack.GetLogicalId(el)
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// asJSON renders v for substring checks on references.
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// importsFrom reports whether v is an Fn::ImportValue of an output of the
// producer stack that names the resource with logical id id.
func importsFrom(v any, producer string, id string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	name, ok := m["Fn::ImportValue"].(string)
	return ok && strings.HasPrefix(name, producer+":") && strings.Contains(name, id)
}
