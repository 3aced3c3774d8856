package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/retention"
	"github.com/maestro-aws/maestro/engine/tracing"
	"github.com/maestro-aws/maestro/engine/trigger/signalmsg"
)

// ContextPrefix prefixes every context key the app reads, in cdk.json or
// with `cdk synth -c maestro:key=value`.
const ContextPrefix = "maestro:"

// Config is everything about the deployment that can change without a code
// change. It is read once from the CDK context by ConfigFromContext; the zero
// value is not useful, start from DefaultConfig.
type Config struct {
	// DBMinCapacity is the Aurora Serverless v2 minimum, in ACUs (0 allows
	// auto-pause, though the engine's LISTEN connections keep it awake).
	// Context key maestro:dbMinCapacity, default 0.5.
	DBMinCapacity float64
	// DBMaxCapacity is the Aurora Serverless v2 maximum, in ACUs.
	// Context key maestro:dbMaxCapacity, default 4.
	DBMaxCapacity float64
	// DBReaders is the number of Serverless v2 reader instances (failover
	// targets) besides the writer. Context key maestro:dbReaders, default 0.
	DBReaders int
	// DBDeletionProtection turns on the cluster's deletion protection.
	// Context key maestro:dbDeletionProtection, default true.
	DBDeletionProtection bool
	// DBRemovalPolicy says what happens to the cluster and its secret when the
	// data stack is deleted: "snapshot" (default), "retain" or "destroy".
	// Context key maestro:dbRemovalPolicy.
	DBRemovalPolicy string

	// GroupCount is the number of flow groups new runs are spread over. The
	// engine and every function that starts runs must agree on it, so it is
	// set in one place and passed to both as MAESTRO_GROUP_COUNT. Raising it
	// later is safe (runs keep the count they started with); lowering it
	// strands runs in groups no engine claims. Context key
	// maestro:groupCount, default 16.
	GroupCount int

	// EngineDesiredCount is the number of engine tasks.
	// Context key maestro:engineDesiredCount, default 2.
	EngineDesiredCount int
	// EngineCPU is the Fargate task CPU in CPU units (1024 = 1 vCPU).
	// Context key maestro:engineCpu, default 512.
	EngineCPU int
	// EngineMemoryMiB is the Fargate task memory in MiB; it must be a valid
	// Fargate pairing with EngineCPU. Context key maestro:engineMemoryMiB,
	// default 1024.
	EngineMemoryMiB int

	// Target says where the app deploys: "aws" (default) or "emulator", a
	// LocalStack-compatible emulator on this machine (`make e2e`). The
	// emulator target leaves out what an emulator cannot host: Aurora (the
	// database secret then points at EmulatorDatabaseURL), the ECS engine
	// (run `maestro engine` locally), the NAT gateway, VPC flow logs, RDS
	// Proxy, secret rotation and the custom resource that locks down the
	// default security group. Context key maestro:target.
	Target string
	// EmulatorDatabaseURL is the PostgreSQL the emulator target's database
	// secret points at (postgres://user:pass@host:port/db). Required with
	// Target "emulator", ignored otherwise. Context key
	// maestro:emulatorDatabaseUrl.
	EmulatorDatabaseURL string

	// LambdaDir holds the Lambda deployment packages, <name>.zip, relative
	// to the repository root (`make build` writes them).
	// Context key maestro:lambdaDir, default build/lambda.
	LambdaDir string
	// LambdaArchitecture is the architecture the packages are built for:
	// "arm64" (default, what `make build` makes) or "x86_64".
	// Context key maestro:lambdaArchitecture.
	LambdaArchitecture string
	// ReservedConcurrency caps each function's concurrent executions (and
	// so its database connections), by function name; 0 leaves a function
	// unreserved. Context keys maestro:<name>ReservedConcurrency, defaults
	// api 20, signals 5, publisher 5, timetrigger 2.
	ReservedConcurrency map[string]int
	// Admins are the callers (IAM principal ARNs) the API treats as
	// administrators (MAESTRO_ADMINS). Context key maestro:admins, a JSON
	// array or a comma-separated string; default none.
	Admins []string

	// DBProxy puts RDS Proxy between the Lambdas and Aurora, so that a burst
	// of function instances shares a bounded set of database connections.
	// Context key maestro:dbProxy, default true.
	DBProxy bool
	// DBProxyMaxConnectionsPercent caps the proxy's connections as a
	// percentage of the database's max_connections, leaving the rest to the
	// engine. Context key maestro:dbProxyMaxConnectionsPercent, default 50.
	DBProxyMaxConnectionsPercent int
	// DBSecretRotationDays rotates the database password every so many days
	// (0 turns rotation off). Context key maestro:dbSecretRotationDays,
	// default 30.
	DBSecretRotationDays int

	// EngineMaxCount is the most engine tasks autoscaling may run; the least
	// is EngineDesiredCount. Context key maestro:engineMaxCount, default 6.
	EngineMaxCount int
	// EngineScaleQueueAgeSeconds is the outbox age (the oldest due
	// message) above which the EngineBacklog alarm fires. The engine scales
	// on CPU only (docs/scaling.md); the key keeps its name so that
	// existing cdk.json files stay valid. Context key
	// maestro:engineScaleQueueAgeSeconds, default 30.
	EngineScaleQueueAgeSeconds int

	// S3SignalBuckets are the S3 buckets allowed to send event
	// notifications to the signals queue. Context key
	// maestro:s3SignalBuckets, a JSON array or comma-separated string.
	S3SignalBuckets []string
	// S3SignalRules is the signals function's MAESTRO_S3_SIGNAL_RULES (JSON:
	// which bucket and prefix raise which signal). Context key
	// maestro:s3SignalRules, a JSON value or a string holding one; default
	// "[]".
	S3SignalRules string
	// TableChangeGlueDatabases are the Glue Data Catalog databases whose
	// "Glue Data Catalog Table State Change" events an EventBridge rule
	// sends to the signals queue, as table-change signals of their
	// Iceberg tables (docs/incremental.md). Context key
	// maestro:tableChangeGlueDatabases; empty (the default) makes no rule.
	TableChangeGlueDatabases []string
	// TableChangeTableBuckets are the S3 Tables table bucket ARNs whose
	// commits (UpdateTableMetadataLocation, from CloudTrail) an
	// EventBridge rule sends to the signals queue. Context key
	// maestro:tableChangeTableBuckets; empty (the default) makes no rule.
	TableChangeTableBuckets []string
	// IcebergCatalogURI and IcebergWarehouse are the Iceberg REST catalog
	// the signals function reads the snapshot of a Glue or S3 Tables event
	// from (MAESTRO_ICEBERG_CATALOG_URI, MAESTRO_ICEBERG_WAREHOUSE):
	// https://s3tables.<region>.amazonaws.com/iceberg with a table bucket
	// ARN, or https://glue.<region>.amazonaws.com/iceberg with the account
	// id. Context keys maestro:icebergCatalogUri and
	// maestro:icebergWarehouse; empty (the default) reads no catalog.
	IcebergCatalogURI string
	IcebergWarehouse  string
	// IcebergManifestLocation is where the manifests of incremental runs'
	// ranges of more than 1000 added files are written
	// (MAESTRO_ICEBERG_MANIFEST_LOCATION, s3://bucket/prefix/). Context key
	// maestro:icebergManifestLocation; empty (the default): such a range
	// does not start its run.
	IcebergManifestLocation string
	// ExampleSubscriberFilter is the SNS filter policy of the example
	// subscriber queue, on the event topic's message attributes. Context key
	// maestro:exampleSubscriberFilter (JSON); default: instance status
	// change events only.
	ExampleSubscriberFilter map[string]any
	// AlarmEmail, when set, subscribes an address to the alert topic that
	// every alarm notifies. Context key maestro:alarmEmail.
	AlarmEmail string
	// APIThrottlingRateLimit is the stage's steady-state request rate (req/s).
	// Context key maestro:apiThrottlingRateLimit, default 100.
	APIThrottlingRateLimit float64
	// APIThrottlingBurstLimit is the stage's burst size.
	// Context key maestro:apiThrottlingBurstLimit, default 200.
	APIThrottlingBurstLimit int
	// APICloudWatchRole creates the account-wide role API Gateway needs to
	// write access logs. Turn it off when the account already has one set.
	// Context key maestro:apiCloudWatchRole, default true.
	APICloudWatchRole bool

	// LogRetentionDays applies to every log group the app creates. It must be
	// one CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180,
	// 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653) or 0 for
	// never expire. Context key maestro:logRetentionDays, default 30.
	LogRetentionDays int

	// StepTargets are the Lambda functions, ECS clusters, task definitions
	// and roles the engine's steps may use (maestro:step* keys, see
	// StepTargets); the engine task role gets exactly their permissions,
	// and the engine's step settings (MAESTRO_ECS_CLUSTER, ...) follow them.
	StepTargets StepTargets

	// ClusterName is the cluster_name of every event (MAESTRO_CLUSTER_NAME
	// of the engine and the functions), so that subscribers of several
	// deployments tell them apart. Context key maestro:clusterName, default
	// "maestro".
	ClusterName string
	// Stage names one of several deployments in an account and region
	// ("dev", "prod"): it prefixes every stack (Maestro-<stage>-Network, ...)
	// and every resource name the app sets itself (the REST API's name), so
	// that two stages never collide. Empty (the default) keeps the unstaged
	// names (MaestroNetwork, API "maestro"). Context key maestro:stage.
	Stage string
	// NatGateways is the number of NAT gateways the private subnets reach
	// the internet through: 2 (the default) puts one in each AZ, so losing
	// an AZ loses only that AZ's egress; 1 saves about 33 USD a month and
	// makes its AZ a single point of failure for every task's egress.
	// Context key maestro:natGateways.
	NatGateways int
	// VpcEndpoints adds interface endpoints for the AWS services the engine
	// tasks and the in-VPC functions call (Secrets Manager, SQS, ECR,
	// CloudWatch Logs, and Lambda / ECS when steps call them), so that those
	// calls stay inside the VPC and do not depend on a NAT gateway. Context
	// key maestro:vpcEndpoints, default false (docs/deploy.md: cost).
	VpcEndpoints bool

	// PublicURL is the base of the run links in alerts
	// (MAESTRO_PUBLIC_URL of the engine), for a custom domain in front of
	// the API. Empty (the default) uses the REST API's stage URL. Context
	// key maestro:publicUrl.
	PublicURL string

	// OTLPEndpoint is where the engine and the functions export their spans
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, docs/tracing.md): X-Ray's
	// https://xray.REGION.amazonaws.com/v1/traces (CloudWatch Transaction
	// Search on in the account; the engine task role is then granted
	// xray:PutTraceSegments, the action that endpoint authorizes), or an
	// OTLP/HTTP collector's traces URL. Empty (the default) exports nothing.
	// Context key maestro:otlpEndpoint.
	OTLPEndpoint string
	// Retention is how long ended runs stay in the database before the
	// archiver moves them to the archive bucket (MAESTRO_RETENTION: a Go
	// duration or days, "90d"; docs/operations.md). A workflow's
	// run_retention_days property overrides it. Context key
	// maestro:retention.
	Retention string
}

// DefaultConfig returns the configuration used for every key the context
// does not set.
func DefaultConfig() Config {
	return Config{
		DBMinCapacity:        0.5,
		DBMaxCapacity:        4,
		DBReaders:            0,
		DBDeletionProtection: true,
		DBRemovalPolicy:      "snapshot",
		GroupCount:           16,
		EngineDesiredCount:   2,
		EngineCPU:            512,
		EngineMemoryMiB:      1024,
		Target:               TargetAWS,
		LambdaDir:            "build/lambda",
		LambdaArchitecture:   "arm64",
		ReservedConcurrency: map[string]int{
			FunctionAPI: 20, FunctionSignals: 5, FunctionPublisher: 5, FunctionTimeTrigger: 2, FunctionArchiver: 1,
		},
		DBProxy:                      true,
		DBProxyMaxConnectionsPercent: 50,
		DBSecretRotationDays:         30,
		EngineMaxCount:               6,
		EngineScaleQueueAgeSeconds:   30,
		S3SignalRules:                "[]",
		ExampleSubscriberFilter: map[string]any{
			EventTypeAttribute: []any{"WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT"},
		},
		APIThrottlingRateLimit:  100,
		APIThrottlingBurstLimit: 200,
		APICloudWatchRole:       true,
		LogRetentionDays:        30,
		ClusterName:             event.DefaultClusterName,
		NatGateways:             2,
		Retention:               "90d",
	}
}

// ConfigFromContext reads the maestro:* keys through get (normally
// Node().TryGetContext) over DefaultConfig and validates the result. Values
// may be JSON typed (cdk.json) or strings (`-c key=value`).
func ConfigFromContext(get func(key string) any) (Config, error) {
	c := DefaultConfig()
	var errs []error
	num := func(key string, dst *float64) {
		if v := get(ContextPrefix + key); v != nil {
			f, err := toFloat(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s%s: %w", ContextPrefix, key, err))
				return
			}
			*dst = f
		}
	}
	integer := func(key string, dst *int) {
		f := float64(*dst)
		num(key, &f)
		if f != math.Trunc(f) {
			errs = append(errs, fmt.Errorf("context %s%s: %v is not a whole number", ContextPrefix, key, f))
			return
		}
		*dst = int(f)
	}
	boolean := func(key string, dst *bool) {
		if v := get(ContextPrefix + key); v != nil {
			b, err := toBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s%s: %w", ContextPrefix, key, err))
				return
			}
			*dst = b
		}
	}
	str := func(key string, dst *string) {
		if v := get(ContextPrefix + key); v != nil {
			s, ok := deref(v).(string)
			if !ok {
				errs = append(errs, fmt.Errorf("context %s%s: want a string, got %T", ContextPrefix, key, v))
				return
			}
			*dst = s
		}
	}

	num("dbMinCapacity", &c.DBMinCapacity)
	num("dbMaxCapacity", &c.DBMaxCapacity)
	integer("dbReaders", &c.DBReaders)
	boolean("dbDeletionProtection", &c.DBDeletionProtection)
	str("dbRemovalPolicy", &c.DBRemovalPolicy)
	integer("groupCount", &c.GroupCount)
	integer("engineDesiredCount", &c.EngineDesiredCount)
	integer("engineCpu", &c.EngineCPU)
	integer("engineMemoryMiB", &c.EngineMemoryMiB)
	str("target", &c.Target)
	str("emulatorDatabaseUrl", &c.EmulatorDatabaseURL)
	str("lambdaDir", &c.LambdaDir)
	str("lambdaArchitecture", &c.LambdaArchitecture)
	str("retention", &c.Retention)
	c.ReservedConcurrency = maps.Clone(c.ReservedConcurrency)
	for _, name := range AllFunctions {
		n := c.ReservedConcurrency[name]
		integer(name+"ReservedConcurrency", &n)
		c.ReservedConcurrency[name] = n
	}
	list := func(key string, dst *[]string) {
		if v := get(ContextPrefix + key); v != nil {
			l, err := toStrings(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s%s: %w", ContextPrefix, key, err))
				return
			}
			*dst = l
		}
	}
	list("admins", &c.Admins)
	boolean("dbProxy", &c.DBProxy)
	integer("dbProxyMaxConnectionsPercent", &c.DBProxyMaxConnectionsPercent)
	integer("dbSecretRotationDays", &c.DBSecretRotationDays)
	integer("engineMaxCount", &c.EngineMaxCount)
	integer("engineScaleQueueAgeSeconds", &c.EngineScaleQueueAgeSeconds)
	list("s3SignalBuckets", &c.S3SignalBuckets)
	list("tableChangeGlueDatabases", &c.TableChangeGlueDatabases)
	list("tableChangeTableBuckets", &c.TableChangeTableBuckets)
	str("icebergCatalogUri", &c.IcebergCatalogURI)
	str("icebergWarehouse", &c.IcebergWarehouse)
	str("icebergManifestLocation", &c.IcebergManifestLocation)
	if v := get(ContextPrefix + "s3SignalRules"); v != nil {
		rules, err := toJSONText(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %ss3SignalRules: %w", ContextPrefix, err))
		} else {
			c.S3SignalRules = rules
		}
	}
	if v := get(ContextPrefix + "exampleSubscriberFilter"); v != nil {
		raw, err := toJSONText(v)
		var m map[string]any
		if err == nil {
			err = json.Unmarshal([]byte(raw), &m)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("context %sexampleSubscriberFilter: want a JSON object: %w", ContextPrefix, err))
		} else {
			c.ExampleSubscriberFilter = m
		}
	}
	str("alarmEmail", &c.AlarmEmail)
	num("apiThrottlingRateLimit", &c.APIThrottlingRateLimit)
	integer("apiThrottlingBurstLimit", &c.APIThrottlingBurstLimit)
	boolean("apiCloudWatchRole", &c.APICloudWatchRole)
	integer("logRetentionDays", &c.LogRetentionDays)
	targets, err := stepTargetsFromContext(get)
	errs = append(errs, err)
	c.StepTargets = targets
	str("clusterName", &c.ClusterName)
	str("publicUrl", &c.PublicURL)
	str("stage", &c.Stage)
	str("otlpEndpoint", &c.OTLPEndpoint)
	integer("natGateways", &c.NatGateways)
	boolean("vpcEndpoints", &c.VpcEndpoints)

	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// NodeContext returns a getter for ConfigFromContext that reads the context
// of node (cdk.json, `-c` flags, the App's Context prop).
func NodeContext(node constructs.Node) func(key string) any {
	return func(key string) any {
		return node.TryGetContext(jsii.String(key))
	}
}

// Validate reports every value that cannot be deployed.
func (c Config) Validate() error {
	errs := c.validateTableChanges()
	if c.DBMinCapacity < 0 || math.Mod(c.DBMinCapacity*2, 1) != 0 {
		errs = append(errs, fmt.Errorf("dbMinCapacity %v: want 0 or more in steps of 0.5", c.DBMinCapacity))
	}
	if c.DBMaxCapacity < 1 || c.DBMaxCapacity > 256 || math.Mod(c.DBMaxCapacity*2, 1) != 0 {
		errs = append(errs, fmt.Errorf("dbMaxCapacity %v: want 1 to 256 in steps of 0.5", c.DBMaxCapacity))
	}
	if c.DBMaxCapacity < c.DBMinCapacity {
		errs = append(errs, fmt.Errorf("dbMaxCapacity %v is below dbMinCapacity %v", c.DBMaxCapacity, c.DBMinCapacity))
	}
	if c.DBReaders < 0 || c.DBReaders > 15 {
		errs = append(errs, fmt.Errorf("dbReaders %d: want 0 to 15", c.DBReaders))
	}
	if _, err := c.removalPolicy(); err != nil {
		errs = append(errs, err)
	}
	if _, err := retention.ParseRetention(c.Retention); err != nil {
		errs = append(errs, fmt.Errorf("retention %q: %w", c.Retention, err))
	}
	if c.GroupCount < 1 || c.GroupCount > 4096 {
		errs = append(errs, fmt.Errorf("groupCount %d: want 1 to 4096", c.GroupCount))
	}
	if c.EngineDesiredCount < 0 {
		errs = append(errs, fmt.Errorf("engineDesiredCount %d: want 0 or more", c.EngineDesiredCount))
	}
	if c.EngineCPU < 256 || c.EngineMemoryMiB < 512 {
		errs = append(errs, fmt.Errorf("engineCpu %d / engineMemoryMiB %d: want at least 256 / 512", c.EngineCPU, c.EngineMemoryMiB))
	}
	switch c.Target {
	case TargetAWS:
	case TargetEmulator:
		if u, err := url.Parse(c.EmulatorDatabaseURL); err != nil || u.Scheme == "" || u.Host == "" {
			errs = append(errs, fmt.Errorf("emulatorDatabaseUrl %q: the emulator target needs a postgres:// URL", c.EmulatorDatabaseURL))
		}
	default:
		errs = append(errs, fmt.Errorf("target %q: want %s or %s", c.Target, TargetAWS, TargetEmulator))
	}
	if strings.TrimSpace(c.LambdaDir) == "" {
		errs = append(errs, errors.New("lambdaDir is empty"))
	}
	if c.LambdaArchitecture != "arm64" && c.LambdaArchitecture != "x86_64" {
		errs = append(errs, fmt.Errorf("lambdaArchitecture %q: want arm64 or x86_64", c.LambdaArchitecture))
	}
	for _, name := range slices.Sorted(maps.Keys(c.ReservedConcurrency)) {
		if n := c.ReservedConcurrency[name]; n < 0 {
			errs = append(errs, fmt.Errorf("%sReservedConcurrency %d: want 0 (unreserved) or more", name, n))
		}
	}
	for _, a := range c.Admins {
		if strings.TrimSpace(a) == "" || strings.ContainsAny(a, ", ") {
			errs = append(errs, fmt.Errorf("admins: %q is not a principal", a))
		}
	}
	if c.DBProxyMaxConnectionsPercent < 1 || c.DBProxyMaxConnectionsPercent > 100 {
		errs = append(errs, fmt.Errorf("dbProxyMaxConnectionsPercent %d: want 1 to 100", c.DBProxyMaxConnectionsPercent))
	}
	if c.DBSecretRotationDays < 0 || c.DBSecretRotationDays > 365 {
		errs = append(errs, fmt.Errorf("dbSecretRotationDays %d: want 0 (off) to 365", c.DBSecretRotationDays))
	}
	if c.EngineMaxCount < c.EngineDesiredCount {
		errs = append(errs, fmt.Errorf("engineMaxCount %d is below engineDesiredCount %d", c.EngineMaxCount, c.EngineDesiredCount))
	}
	if c.EngineScaleQueueAgeSeconds < 1 {
		errs = append(errs, fmt.Errorf("engineScaleQueueAgeSeconds %d: want 1 or more", c.EngineScaleQueueAgeSeconds))
	}
	if !json.Valid([]byte(c.S3SignalRules)) {
		errs = append(errs, fmt.Errorf("s3SignalRules %q is not JSON", c.S3SignalRules))
	} else if _, err := signalmsg.ParseRules(c.S3SignalRules); err != nil {
		// The signals function would refuse them at its cold start.
		errs = append(errs, fmt.Errorf("s3SignalRules: %w", err))
	}
	if c.APIThrottlingRateLimit <= 0 || c.APIThrottlingBurstLimit <= 0 {
		errs = append(errs, fmt.Errorf("apiThrottlingRateLimit %v / apiThrottlingBurstLimit %d: want both above 0",
			c.APIThrottlingRateLimit, c.APIThrottlingBurstLimit))
	}
	if _, err := c.logRetention(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.StepTargets.Validate())
	if err := checkFilterPolicy(c.ExampleSubscriberFilter); err != nil {
		errs = append(errs, fmt.Errorf("exampleSubscriberFilter: %w", err))
	}
	if strings.TrimSpace(c.ClusterName) == "" {
		errs = append(errs, errors.New("clusterName is empty"))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("publicUrl %q: want the API's base URL, https://host[/path]", c.PublicURL))
		}
	}
	if c.OTLPEndpoint != "" {
		if u, err := url.Parse(c.OTLPEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("otlpEndpoint %q: want an OTLP/HTTP traces URL, e.g. https://xray.REGION.amazonaws.com/v1/traces", c.OTLPEndpoint))
		} else if tracing.XRayEndpoint(c.OTLPEndpoint) && (u.Scheme != "https" || u.Path != "/v1/traces") {
			errs = append(errs, fmt.Errorf("otlpEndpoint %q: X-Ray's OTLP endpoint is https://%s/v1/traces", c.OTLPEndpoint, u.Host))
		}
	}
	if c.Stage != "" && !stagePattern.MatchString(c.Stage) {
		errs = append(errs, fmt.Errorf("stage %q: want a lower-case letter then up to 15 lower-case letters, digits or hyphens", c.Stage))
	}
	if c.NatGateways < 1 || c.NatGateways > 2 {
		errs = append(errs, fmt.Errorf("natGateways %d: want 1 or 2 (one per AZ)", c.NatGateways))
	}
	return errors.Join(errs...)
}

// stagePattern is what a stage may be: it becomes part of stack names
// (letters, digits, hyphens) and of resource names with tighter rules.
var stagePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)

// StackPrefix starts the id (and CloudFormation name) of every stack of
// the deployment: "Maestro" without a stage, "Maestro-<stage>-" with one.
func (c Config) StackPrefix() string {
	if c.Stage == "" {
		return StackPrefix
	}
	return StackPrefix + "-" + c.Stage + "-"
}

// ResourceName is name with the stage appended ("maestro-dev"): for the
// resources the app names itself.
func (c Config) ResourceName(name string) string {
	if c.Stage == "" {
		return name
	}
	return name + "-" + c.Stage
}

// checkFilterPolicy checks that an SNS filter policy selects on message
// attributes the publisher sets (event.AttributeNames): a policy on any
// other attribute would silently let nothing through. "$or" takes a list of
// policies.
func checkFilterPolicy(policy map[string]any) error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(policy)) {
		if key == "$or" {
			alts, ok := policy[key].([]any)
			if !ok || len(alts) == 0 {
				errs = append(errs, errors.New(`"$or" wants a list of filter policies`))
				continue
			}
			for _, alt := range alts {
				m, ok := alt.(map[string]any)
				if !ok {
					errs = append(errs, errors.New(`"$or" wants a list of filter policies`))
					continue
				}
				errs = append(errs, checkFilterPolicy(m))
			}
			continue
		}
		if !slices.Contains(event.AttributeNames(), key) {
			errs = append(errs, fmt.Errorf("%q is not a message attribute of Maestro's events (%s)", key,
				strings.Join(event.AttributeNames(), ", ")))
		}
		if _, ok := policy[key].([]any); !ok {
			errs = append(errs, fmt.Errorf("%q: want a list of values or conditions", key))
		}
	}
	return errors.Join(errs...)
}

// Deployment targets (Config.Target).
const (
	TargetAWS      = "aws"
	TargetEmulator = "emulator"
)

// Emulator reports whether the app deploys to the emulator.
func (c Config) Emulator() bool { return c.Target == TargetEmulator }

// CodePath is the deployment package of the named function.
func (c Config) CodePath(name string) string {
	return filepath.Join(c.LambdaDir, name+".zip")
}

// removalPolicy maps DBRemovalPolicy to the CDK value.
func (c Config) removalPolicy() (awscdk.RemovalPolicy, error) {
	switch strings.ToLower(c.DBRemovalPolicy) {
	case "snapshot":
		return awscdk.RemovalPolicy_SNAPSHOT, nil
	case "retain":
		return awscdk.RemovalPolicy_RETAIN, nil
	case "destroy":
		return awscdk.RemovalPolicy_DESTROY, nil
	}
	return "", fmt.Errorf("dbRemovalPolicy %q: want snapshot, retain or destroy", c.DBRemovalPolicy)
}

// retentionByDays lists the retention periods CloudWatch Logs accepts.
var retentionByDays = map[int]awslogs.RetentionDays{
	0:    awslogs.RetentionDays_INFINITE,
	1:    awslogs.RetentionDays_ONE_DAY,
	3:    awslogs.RetentionDays_THREE_DAYS,
	5:    awslogs.RetentionDays_FIVE_DAYS,
	7:    awslogs.RetentionDays_ONE_WEEK,
	14:   awslogs.RetentionDays_TWO_WEEKS,
	30:   awslogs.RetentionDays_ONE_MONTH,
	60:   awslogs.RetentionDays_TWO_MONTHS,
	90:   awslogs.RetentionDays_THREE_MONTHS,
	120:  awslogs.RetentionDays_FOUR_MONTHS,
	150:  awslogs.RetentionDays_FIVE_MONTHS,
	180:  awslogs.RetentionDays_SIX_MONTHS,
	365:  awslogs.RetentionDays_ONE_YEAR,
	400:  awslogs.RetentionDays_THIRTEEN_MONTHS,
	545:  awslogs.RetentionDays_EIGHTEEN_MONTHS,
	731:  awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS,
	1827: awslogs.RetentionDays_FIVE_YEARS,
	2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS,
	2922: awslogs.RetentionDays_EIGHT_YEARS,
	3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

// logRetention maps LogRetentionDays to the CDK value.
func (c Config) logRetention() (awslogs.RetentionDays, error) {
	r, ok := retentionByDays[c.LogRetentionDays]
	if !ok {
		return "", fmt.Errorf("logRetentionDays %d: not a period CloudWatch Logs accepts", c.LogRetentionDays)
	}
	return r, nil
}

func deref(v any) any {
	switch p := v.(type) {
	case *string:
		if p != nil {
			return *p
		}
	case *float64:
		if p != nil {
			return *p
		}
	case *bool:
		if p != nil {
			return *p
		}
	}
	return v
}

func toFloat(v any) (float64, error) {
	switch x := deref(v).(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x)
		}
		return f, nil
	}
	return 0, fmt.Errorf("want a number, got %T", v)
}

// toStrings reads a list: a JSON array of strings or a comma-separated
// string.
func toStrings(v any) ([]string, error) {
	var out []string
	switch x := deref(v).(type) {
	case string:
		for _, s := range strings.Split(x, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	case []any:
		for _, e := range x {
			s, ok := deref(e).(string)
			if !ok {
				return nil, fmt.Errorf("want strings, got %T", e)
			}
			out = append(out, s)
		}
		return out, nil
	case []*string:
		for _, e := range x {
			out = append(out, *e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list or a comma-separated string, got %T", v)
}

// toJSONText renders a context value as JSON text: a string is taken to be
// JSON already (from -c), anything else is marshalled.
func toJSONText(v any) (string, error) {
	if s, ok := deref(v).(string); ok {
		if !json.Valid([]byte(s)) {
			return "", fmt.Errorf("%q is not JSON", s)
		}
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func toBool(v any) (bool, error) {
	switch x := deref(v).(type) {
	case bool:
		return x, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			return false, fmt.Errorf("%q is not a boolean", x)
		}
		return b, nil
	}
	return false, fmt.Errorf("want a boolean, got %T", v)
}

// tableBucketARN is an S3 Tables table bucket's ARN.
var tableBucketARN = regexp.MustCompile(`^arn:aws[a-z-]*:s3tables:[a-z0-9-]+:[0-9]{12}:bucket/[a-z0-9_-]{3,63}$`)

// validateTableChanges checks the table-change sources and the Iceberg
// catalog.
func (c Config) validateTableChanges() []error {
	var errs []error
	for _, b := range c.TableChangeTableBuckets {
		if !tableBucketARN.MatchString(b) {
			errs = append(errs, fmt.Errorf("tableChangeTableBuckets: %q is not a table bucket ARN", b))
		}
	}
	for _, d := range c.TableChangeGlueDatabases {
		if d == "" || strings.ContainsAny(d, "/*") {
			errs = append(errs, fmt.Errorf("tableChangeGlueDatabases: %q is not a database name", d))
		}
	}
	switch {
	case c.IcebergCatalogURI == "" && c.IcebergWarehouse != "":
		errs = append(errs, errors.New("icebergWarehouse is set but icebergCatalogUri is not"))
	case c.IcebergCatalogURI != "" && !strings.HasPrefix(c.IcebergCatalogURI, "https://") && !strings.HasPrefix(c.IcebergCatalogURI, "http://"):
		errs = append(errs, fmt.Errorf("icebergCatalogUri %q: want an http(s) URL", c.IcebergCatalogURI))
	}
	if loc := c.IcebergManifestLocation; loc != "" && (!strings.HasPrefix(loc, "s3://") || strings.Trim(strings.TrimPrefix(loc, "s3://"), "/") == "" ||
		c.IcebergCatalogURI == "") {
		errs = append(errs, fmt.Errorf("icebergManifestLocation %q: want s3://bucket/prefix/, with icebergCatalogUri set", loc))
	}
	if (len(c.TableChangeGlueDatabases) > 0 || len(c.TableChangeTableBuckets) > 0) && c.IcebergCatalogURI == "" {
		errs = append(errs, errors.New("tableChangeGlueDatabases / tableChangeTableBuckets need icebergCatalogUri: "+
			"their events carry no snapshot, which the signals function reads from the catalog"))
	}
	return errs
}
