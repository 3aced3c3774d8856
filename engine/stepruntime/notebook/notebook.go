// Package notebook is the Notebook step runtime, Maestro's Notebook step
// on AWS: each attempt runs papermill in a container carried by a Batch
// job or an ECS task (the engine's configured carrier, whose runtime it
// reuses, with its at-most-once protocol, crash recovery and stop), with
// the input notebook from S3, HTTP(S) or a git repository and the output
// notebook written to S3. The step's `notebook` MAP param has Maestro's
// fields (input_path, output_path, init_command, git_repo, git_branch,
// git_commit, git_submodules, papermill_arguments); papermill's command
// line is Maestro's (PapermillEntrypointBuilder): `init_command papermill
// input output -y <params as JSON> --log-output <arguments>
// --start_timeout 600`. Once the job ends the runtime reads the output
// notebook and returns its location and the outputs the notebook printed
// between MAESTRO_OUTPUT_START and MAESTRO_OUTPUT_END (Maestro's
// convention) or glued with scrapbook as output params. See
// docs/step-runtimes.md.
package notebook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/batch"
	"github.com/maestro-aws/maestro/engine/stepruntime/ecstask"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
	"github.com/maestro-aws/maestro/engine/stepruntime/jobparam"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Type is the step type this runtime runs (Maestro's).
const Type = "Notebook"

// ParamNotebook is Maestro's MAP param of a notebook step, and
// ParamKubernetes the container's (Maestro's Kubernetes fields: cpu,
// memory and env are used; image is the carrier definition's).
const (
	ParamNotebook   = "notebook"
	ParamKubernetes = "kubernetes"
)

// Carriers: the step types whose job runs the notebook.
const (
	CarrierBatch   = batch.Type
	CarrierEcsTask = ecstask.Type
)

// Output params of a notebook that ran.
const (
	// OutputNotebook is the output notebook's location (s3://...).
	OutputNotebook = "output_notebook"
)

// Keys of the runtime data, besides the carrier's.
const (
	KeyOutputNotebook = "output_notebook"
	KeyInputNotebook  = "input_notebook"
)

// Markers of Maestro's output convention in a cell's printed output.
const (
	OutputStart = "MAESTRO_OUTPUT_START"
	OutputEnd   = "MAESTRO_OUTPUT_END"
)

// StartTimeout is papermill's --start_timeout when the step sets none
// (Maestro's default).
const StartTimeout = "600"

// Fields of the `notebook` param: Maestro's. Other fields are passed to
// the notebook as parameters.
var Fields = []string{"input_path", "output_path", "init_command", "git_repo", "git_branch", "git_commit", "git_submodules",
	"papermill_arguments", "run_id"}

// KubernetesFields are Maestro's fields of the `kubernetes` param.
var KubernetesFields = []string{"app_name", "cpu", "disk", "gpu", "memory", "image", "command", "args", "env",
	"job_deduplication_key", "owner_email"}

// Objects reads the output notebook; *s3.Client has it through
// S3Objects.
type Objects interface {
	// Read returns the object at bucket/key, at most limit bytes.
	Read(ctx context.Context, bucket, key string, limit int64) ([]byte, error)
}

// MaxNotebookBytes bounds the output notebook read for its outputs.
const MaxNotebookBytes = 32 << 20

// Config configures the runtime.
type Config struct {
	// Carrier is CarrierBatch or CarrierEcsTask.
	Carrier string
	// Job is the carrier's job: the external.Job of the Batch or EcsTask
	// runtime (Runtime.Job of what batch.New or ecstask.New returned).
	Job external.Job
	// JobQueue and JobDefinition are the Batch job's (CarrierBatch).
	JobQueue      string
	JobDefinition string
	// TaskDefinition and Container are the ECS task's (CarrierEcsTask);
	// the cluster and network are the EcsTask runtime's defaults.
	TaskDefinition string
	Container      string
	// OutputPrefix is where output notebooks go (s3://bucket/prefix/)
	// unless a step's output_path is an s3:// URI itself.
	OutputPrefix string
	// Objects reads output notebooks. Required.
	Objects Objects
	// Logger receives what the step's timeline does not (required).
	Logger *slog.Logger
}

// New returns the Notebook runtime.
func New(cfg Config) (stepruntime.Runtime, error) {
	switch {
	case cfg.Job == nil || cfg.Objects == nil || cfg.Logger == nil:
		return nil, errors.New("notebook: Config.Job, Config.Objects and Config.Logger are required")
	case cfg.Carrier == CarrierBatch && cfg.JobDefinition == "":
		return nil, errors.New("notebook: a Batch carrier needs its job definition")
	case cfg.Carrier == CarrierEcsTask && cfg.TaskDefinition == "":
		return nil, errors.New("notebook: an EcsTask carrier needs its task definition")
	case cfg.Carrier != CarrierBatch && cfg.Carrier != CarrierEcsTask:
		return nil, fmt.Errorf("notebook: carrier %q: want %s or %s", cfg.Carrier, CarrierBatch, CarrierEcsTask)
	}
	if cfg.OutputPrefix != "" {
		if _, _, err := ParseS3(cfg.OutputPrefix); err != nil {
			return nil, fmt.Errorf("notebook: output prefix: %w", err)
		}
		if !strings.HasSuffix(cfg.OutputPrefix, "/") {
			cfg.OutputPrefix += "/"
		}
	}
	return runtime{external.Runtime{Job: &job{cfg: cfg}}}, nil
}

// runtime is the protocol's runtime; a step_update message (a Batch
// carrier's state-change event, awsjob) makes its attempt look at its job
// at once.
type runtime struct{ external.Runtime }

// WakesOnUpdate implements stepruntime.Woken.
func (runtime) WakesOnUpdate() {}

type job struct {
	cfg Config
}

// spec is a notebook step, read from its params.
type spec struct {
	Input, Output string
	InitCommand   string
	GitRepo       string
	GitBranch     string
	GitCommit     string
	GitSubmodules bool
	Arguments     []string
	CPU, Memory   string
	Env           map[string]string
	// Extra are the notebook param's other fields: Maestro accepts them,
	// and they reach the notebook as its parameters.
	Extra map[string]any
}

func (j *job) spec(a *stepruntime.Attempt) (*spec, error) {
	r, err := jobparam.Open(a.Params, ParamNotebook, "input_path (and output_path, init_command, git_repo, papermill_arguments, ...)")
	if err != nil {
		return nil, err
	}
	s := &spec{
		Extra:         r.Others(Fields...),
		Input:         r.Required("input_path"),
		Output:        r.String("output_path", ""),
		InitCommand:   r.String("init_command", ""),
		GitRepo:       r.String("git_repo", ""),
		GitBranch:     r.String("git_branch", ""),
		GitCommit:     r.String("git_commit", ""),
		GitSubmodules: r.Bool("git_submodules", false),
		Arguments:     r.Strings("papermill_arguments"),
	}
	if k, ok := a.Params[ParamKubernetes].(map[string]any); ok {
		kr, _ := jobparam.Open(map[string]any{ParamKubernetes: k}, ParamKubernetes, "")
		kr.Known(KubernetesFields...)
		s.CPU = kr.String("cpu", "")
		s.Memory = kr.String("memory", "")
		s.Env = kr.StringMap("env")
		r.Absorb(kr)
	}
	if s.Output == "" {
		// Maestro's default name, with the attempt's start (stable across
		// restarts) for the run's time.
		s.Output = fmt.Sprintf("maestro-output_%s__%d_%s_%s.ipynb", a.StartTime.UTC().Format("20060102150405"), a.InstanceID,
			safeName(a.StepID), a.UUID)
	}
	if !strings.HasPrefix(s.Output, "s3://") {
		if j.cfg.OutputPrefix == "" {
			r.Fail("%s.output_path %q is not an s3:// URI and this engine has no notebook output prefix (MAESTRO_NOTEBOOK_OUTPUT_PREFIX)",
				ParamNotebook, s.Output)
		}
		s.Output = j.cfg.OutputPrefix + strings.TrimPrefix(s.Output, "/")
	}
	if _, _, err := ParseS3(s.Output); err != nil {
		r.Fail("%s.output_path: %v", ParamNotebook, err)
	}
	return s, r.Err()
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == '\'' {
			return '_'
		}
		return r
	}, s)
}

// ParseS3 splits s3://bucket/key.
func ParseS3(uri string) (bucket, key string, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return "", "", fmt.Errorf("%q is not an s3://bucket/key URI", uri)
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), nil
}

// quote is a single-quoted shell word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// excluded are params papermill does not get (Maestro's list).
var excluded = []string{params.WorkflowID, params.StepAttemptID, params.StepInstanceUUID, params.WorkflowInstanceID,
	"step_satisfied", params.FirstTimeTriggerTimezone, "INITIATOR_TIMEZONE", ParamNotebook, ParamKubernetes}

// notebookParams are the params the notebook gets (papermill -y): the
// notebook param's own extra fields, the step's evaluated params but the
// excluded ones and empty strings, and attempt_number (the attempt's
// number less one), as Maestro's.
func notebookParams(a *stepruntime.Attempt, s *spec) (string, error) {
	out := map[string]any{}
	maps.Copy(out, s.Extra)
	for k, v := range a.Params {
		if slices.Contains(excluded, k) || v == "" {
			continue
		}
		if pv, ok := v.(params.Value); ok {
			v = pv.Value
		}
		out[k] = v
	}
	out["attempt_number"] = a.AttemptID - 1
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("notebook params as JSON: %w", err)
	}
	return string(b), nil
}

// Entrypoint is the shell command the container runs, Maestro's.
func Entrypoint(s *spec, paramsJSON string) string {
	args := make([]string, 0, len(s.Arguments)+2)
	args = append(args, s.Arguments...)
	if !slices.Contains(args, "--start_timeout") {
		args = append(args, "--start_timeout", StartTimeout)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = quote(strings.TrimSpace(a))
	}
	tail := fmt.Sprintf("%s -y %s --log-output %s", quote(s.Output), quote(paramsJSON), strings.Join(quoted, " "))
	in := quote(s.Input)
	if s.GitRepo == "" {
		return strings.TrimSpace(fmt.Sprintf("%s papermill %s %s", s.InitCommand, in, tail))
	}
	const dir = "maestro_notebook_git_repo"
	clone := "git clone"
	if s.GitSubmodules {
		clone += " --recurse-submodules"
	}
	var git string
	switch {
	case s.GitBranch != "":
		git = fmt.Sprintf("%s -b %s %s %s && cd \"%s/$(dirname %s)\" &&", clone, quote(s.GitBranch), quote(s.GitRepo), dir, dir, in)
	case s.GitCommit != "":
		git = fmt.Sprintf("%s %s %s && cd \"%s/$(dirname %s)\" && git checkout %s &&", clone, quote(s.GitRepo), dir, dir, in, quote(s.GitCommit))
	default:
		git = fmt.Sprintf("%s %s %s && cd \"%s/$(dirname %s)\" &&", clone, quote(s.GitRepo), dir, dir, in)
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s papermill \"$(basename %s)\" %s", s.InitCommand, git, in, tail))
}

// carried is the attempt as the carrier's job sees it: its params are the
// carrier's job param, running the entrypoint.
func (j *job) carried(a *stepruntime.Attempt) (*stepruntime.Attempt, *spec, error) {
	s, err := j.spec(a)
	if err != nil {
		return nil, nil, err
	}
	pj, err := notebookParams(a, s)
	if err != nil {
		return nil, nil, err
	}
	command := []any{"/bin/sh", "-c", Entrypoint(s, pj)}
	env := map[string]any{"MAESTRO_NOTEBOOK_INPUT": s.Input, "MAESTRO_NOTEBOOK_OUTPUT": s.Output}
	for k, v := range s.Env {
		env[k] = v
	}
	c := *a
	switch j.cfg.Carrier {
	case CarrierBatch:
		overrides := map[string]any{"command": command, "environment": env}
		if s.CPU != "" {
			overrides["vcpus"] = s.CPU
		}
		if s.Memory != "" {
			overrides["memory"] = s.Memory
		}
		m := map[string]any{"job_definition": j.cfg.JobDefinition, "container_overrides": overrides, "job_name": "notebook-" + a.StepID}
		if j.cfg.JobQueue != "" {
			m["job_queue"] = j.cfg.JobQueue
		}
		c.Params = map[string]any{batch.ParamBatch: m}
	default:
		m := map[string]any{"task_definition": j.cfg.TaskDefinition, "command": command, "env": env}
		if j.cfg.Container != "" {
			m["container"] = j.cfg.Container
		}
		if s.CPU != "" {
			m["cpu"] = s.CPU
		}
		if s.Memory != "" {
			m["memory"] = s.Memory
		}
		c.Params = map[string]any{ecstask.ParamECSTask: m}
	}
	return &c, s, nil
}

// Check implements external.Job.
func (j *job) Check(a *stepruntime.Attempt) error {
	c, _, err := j.carried(a)
	if err != nil {
		return err
	}
	if err := j.cfg.Job.Check(c); err != nil {
		return fmt.Errorf("the notebook's %s carrier: %w", j.cfg.Carrier, err)
	}
	return nil
}

// Launch implements external.Job: the carrier's launch.
func (j *job) Launch(ctx context.Context, a *stepruntime.Attempt, key string) stepruntime.Result {
	c, s, err := j.carried(a)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	res := j.cfg.Job.Launch(ctx, c, key)
	return withLocations(res, s)
}

// Find implements external.Job: the carrier's lookup.
func (j *job) Find(ctx context.Context, a *stepruntime.Attempt, key string) (stepruntime.Result, bool, error) {
	c, s, err := j.carried(a)
	if err != nil {
		return stepruntime.Result{}, false, err
	}
	res, ok, err := j.cfg.Job.Find(ctx, c, key)
	return withLocations(res, s), ok, err
}

// Cancel implements external.Job: the carrier's stop.
func (j *job) Cancel(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	c, _, err := j.carried(a)
	if err != nil {
		// The params no longer read; the carrier's data alone stops it.
		c = a
	}
	return j.cfg.Job.Cancel(ctx, c)
}

// withLocations adds the notebooks' locations to a result that carries
// data.
func withLocations(res stepruntime.Result, s *spec) stepruntime.Result {
	if res.Data == nil || res.Data[external.KeyLaunch] == external.LaunchIntended {
		return res
	}
	res.Data = maps.Clone(res.Data)
	res.Data[KeyInputNotebook] = s.Input
	res.Data[KeyOutputNotebook] = s.Output
	return res
}

// Poll implements external.Job: the carrier's poll; once the job
// succeeded, the output notebook's outputs.
func (j *job) Poll(ctx context.Context, a *stepruntime.Attempt) stepruntime.Result {
	c, s, err := j.carried(a)
	if err != nil {
		return stepruntime.Result{State: stepruntime.FatalError, Message: err.Error()}
	}
	res := j.cfg.Job.Poll(ctx, c)
	if res.State == stepruntime.Continue || res.State == stepruntime.Stopped {
		return res
	}
	if res.State != stepruntime.Done {
		res.Message += "; the output notebook, with the failing cell, is at " + s.Output
		return res
	}
	bucket, key, _ := ParseS3(s.Output)
	raw, err := j.cfg.Objects.Read(ctx, bucket, key, MaxNotebookBytes)
	if err != nil {
		if ctx.Err() != nil {
			return stepruntime.Result{State: stepruntime.Continue, NextPollDelay: time.Second}
		}
		return stepruntime.Result{State: stepruntime.UserError, Data: res.Data,
			Message: fmt.Sprintf("the notebook's job succeeded but its output notebook %s cannot be read: %v", s.Output, err)}
	}
	outs, err := Outputs(raw)
	if err != nil {
		return stepruntime.Result{State: stepruntime.UserError, Data: res.Data,
			Message: fmt.Sprintf("output notebook %s: %v", s.Output, err)}
	}
	if res.Outputs == nil {
		res.Outputs = map[string]any{}
	}
	maps.Copy(res.Outputs, outs)
	res.Outputs[OutputNotebook] = params.Value{Type: workflow.ParamTypeString, Value: s.Output}
	res.Message = fmt.Sprintf("notebook ran: %s (%d output params)", s.Output, len(outs))
	return res
}
