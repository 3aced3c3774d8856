// Package batchtest is an in-memory AWS Batch for tests of the Batch
// runtime: Fake implements batch.API (SubmitJob, DescribeJobs, ListJobs
// with the JOB_NAME filter, TerminateJob), and Handler serves the same
// state over Batch's REST-JSON protocol, so that the real SDK client of an
// engine process can call it through a custom endpoint.
//
// Unlike the emulator's Batch, whose jobs succeed the moment they are
// submitted, a fake job moves through RUNNABLE and RUNNING: it runs for
// the duration in its RUN_FOR environment variable (default 0) and exits
// with EXIT_CODE (default 0); NO_EXIT_CODE makes it fail as a host lost.
package batchtest

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsbatch "github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
)

// Region and Account appear in the fake's ARNs.
const (
	Region  = "us-east-1"
	Account = "000000000000"
)

// Fake is an in-memory Batch. The zero value is not usable; call New.
type Fake struct {
	// SubmitAnswerDelay holds Handler's answer to a SubmitJob (the job is
	// already created) for a while, so that a killed caller loses it.
	SubmitAnswerDelay time.Duration

	mu       sync.Mutex
	now      func() time.Time
	jobs     map[string]*job // by id
	order    []string
	submits  map[string]int // job name -> SubmitJob calls that created a job
	calls    map[string]int
	failNext map[string]error
	loseNext map[string]error
	// lostAnswers counts SubmitJob answers Handler never sent (the caller
	// went away while SubmitAnswerDelay held them).
	lostAnswers int
}

// LostAnswers returns how many SubmitJob answers Handler never delivered:
// jobs created whose caller never learnt their id.
func (f *Fake) LostAnswers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lostAnswers
}

type job struct {
	d          types.JobDetail
	submitted  time.Time
	runFor     time.Duration
	exitCode   int32
	noExitCode bool
	terminated string
}

// New returns an empty fake.
func New() *Fake {
	return &Fake{now: time.Now, jobs: map[string]*job{}, submits: map[string]int{}, calls: map[string]int{},
		failNext: map[string]error{}, loseNext: map[string]error{}}
}

// FailNext makes the next call of op (e.g. "SubmitJob") fail with err.
func (f *Fake) FailNext(op string, err error) {
	f.mu.Lock()
	f.failNext[op] = err
	f.mu.Unlock()
}

// LoseNextAnswer makes the next call of op happen and then fail with err,
// as when the answer is lost on the way back.
func (f *Fake) LoseNextAnswer(op string, err error) {
	f.mu.Lock()
	f.loseNext[op] = err
	f.mu.Unlock()
}

// Submits returns how many jobs SubmitJob created under name.
func (f *Fake) Submits(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.submits[name]
}

// AllSubmits returns the jobs created per job name.
func (f *Fake) AllSubmits() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.submits)
}

// Calls returns how many times op was called.
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Job returns the job with id as it is now.
func (f *Fake) Job(id string) (types.JobDetail, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return types.JobDetail{}, false
	}
	f.advance(j)
	return j.d, true
}

// begin counts a call and returns the failure set for it, if any.
func (f *Fake) begin(op string) error {
	f.calls[op]++
	err := f.failNext[op]
	delete(f.failNext, op)
	return err
}

func (f *Fake) lost(op string) error {
	err := f.loseNext[op]
	delete(f.loseNext, op)
	return err
}

func clientError(code, msg string) error {
	return &smithy.GenericAPIError{Code: code, Message: msg, Fault: smithy.FaultClient}
}

// SubmitJob implements batch.API.
func (f *Fake) SubmitJob(_ context.Context, in *awsbatch.SubmitJobInput, _ ...func(*awsbatch.Options)) (*awsbatch.SubmitJobOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("SubmitJob"); err != nil {
		return nil, err
	}
	if aws.ToString(in.JobName) == "" || aws.ToString(in.JobQueue) == "" || aws.ToString(in.JobDefinition) == "" {
		return nil, clientError("ClientException", "jobName, jobQueue and jobDefinition are required")
	}
	id := uuid.NewString()
	now := f.now()
	j := &job{submitted: now, d: types.JobDetail{
		JobId: aws.String(id), JobArn: aws.String(fmt.Sprintf("arn:aws:batch:%s:%s:job/%s", Region, Account, id)),
		JobName: in.JobName, JobQueue: in.JobQueue, JobDefinition: in.JobDefinition, Status: types.JobStatusSubmitted,
		CreatedAt: aws.Int64(now.UnixMilli()), Parameters: in.Parameters, Tags: in.Tags,
		Container: &types.ContainerDetail{},
	}}
	if o := in.ContainerOverrides; o != nil {
		j.d.Container.Command = o.Command
		j.d.Container.Environment = o.Environment
		for _, kv := range o.Environment {
			switch aws.ToString(kv.Name) {
			case "RUN_FOR":
				j.runFor, _ = time.ParseDuration(aws.ToString(kv.Value))
			case "EXIT_CODE":
				n, _ := strconv.Atoi(aws.ToString(kv.Value))
				j.exitCode = int32(n)
			case "NO_EXIT_CODE":
				j.noExitCode = true
			}
		}
	}
	f.jobs[id] = j
	f.order = append(f.order, id)
	f.submits[aws.ToString(in.JobName)]++
	if err := f.lost("SubmitJob"); err != nil {
		return nil, err
	}
	return &awsbatch.SubmitJobOutput{JobId: aws.String(id), JobName: in.JobName, JobArn: j.d.JobArn}, nil
}

// advance moves a job along its life by the clock.
func (f *Fake) advance(j *job) {
	if j.d.Status == types.JobStatusSucceeded || j.d.Status == types.JobStatusFailed {
		return
	}
	age := f.now().Sub(j.submitted)
	switch {
	case j.terminated != "":
		j.d.Status, j.d.StatusReason = types.JobStatusFailed, aws.String(j.terminated)
		j.d.StoppedAt = aws.Int64(f.now().UnixMilli())
	case age >= j.runFor+50*time.Millisecond:
		j.d.StoppedAt = aws.Int64(f.now().UnixMilli())
		if j.noExitCode {
			j.d.Status, j.d.StatusReason = types.JobStatusFailed, aws.String("Host EC2 (instance i-0123) terminated.")
			return
		}
		j.d.Container.ExitCode = aws.Int32(j.exitCode)
		j.d.Container.LogStreamName = aws.String("job/default/" + aws.ToString(j.d.JobId))
		if j.exitCode == 0 {
			j.d.Status, j.d.StatusReason = types.JobStatusSucceeded, aws.String("Essential container in task exited")
		} else {
			j.d.Status, j.d.StatusReason = types.JobStatusFailed, aws.String("Essential container in task exited")
		}
	case age >= 50*time.Millisecond:
		j.d.Status = types.JobStatusRunning
		j.d.StartedAt = aws.Int64(j.submitted.Add(50 * time.Millisecond).UnixMilli())
		j.d.Container.LogStreamName = aws.String("job/default/" + aws.ToString(j.d.JobId))
	default:
		j.d.Status = types.JobStatusRunnable
	}
}

// DescribeJobs implements batch.API.
func (f *Fake) DescribeJobs(_ context.Context, in *awsbatch.DescribeJobsInput, _ ...func(*awsbatch.Options)) (*awsbatch.DescribeJobsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("DescribeJobs"); err != nil {
		return nil, err
	}
	out := &awsbatch.DescribeJobsOutput{}
	for _, id := range in.Jobs {
		if j, ok := f.jobs[id]; ok {
			f.advance(j)
			// A copy the caller may read after the lock is released
			// (the server encodes it) while advance changes the job.
			d := j.d
			if d.Container != nil {
				c := *d.Container
				d.Container = &c
			}
			out.Jobs = append(out.Jobs, d)
		}
	}
	return out, nil
}

// ListJobs implements batch.API: the queue's jobs, by JOB_NAME when that
// filter is given (every status then), else by jobStatus (RUNNING by
// default), as Batch does; two jobs a page, so that callers page.
func (f *Fake) ListJobs(_ context.Context, in *awsbatch.ListJobsInput, _ ...func(*awsbatch.Options)) (*awsbatch.ListJobsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListJobs"); err != nil {
		return nil, err
	}
	name := ""
	for _, flt := range in.Filters {
		if aws.ToString(flt.Name) == "JOB_NAME" && len(flt.Values) > 0 {
			name = flt.Values[0]
		}
	}
	status := in.JobStatus
	if status == "" {
		status = types.JobStatusRunning
	}
	var match []types.JobSummary
	for _, id := range f.order {
		j := f.jobs[id]
		f.advance(j)
		if aws.ToString(j.d.JobQueue) != aws.ToString(in.JobQueue) {
			continue
		}
		if name != "" && aws.ToString(j.d.JobName) != name || name == "" && j.d.Status != status {
			continue
		}
		match = append(match, types.JobSummary{JobId: j.d.JobId, JobArn: j.d.JobArn, JobName: j.d.JobName,
			Status: j.d.Status, CreatedAt: j.d.CreatedAt})
	}
	start, _ := strconv.Atoi(aws.ToString(in.NextToken))
	start = min(start, len(match))
	end := min(start+2, len(match))
	out := &awsbatch.ListJobsOutput{JobSummaryList: match[start:end]}
	if end < len(match) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

// TerminateJob implements batch.API: a job not yet ended fails with the
// reason given.
func (f *Fake) TerminateJob(_ context.Context, in *awsbatch.TerminateJobInput, _ ...func(*awsbatch.Options)) (*awsbatch.TerminateJobOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("TerminateJob"); err != nil {
		return nil, err
	}
	j, ok := f.jobs[aws.ToString(in.JobId)]
	if !ok {
		return nil, clientError("ClientException", "job not found: "+aws.ToString(in.JobId))
	}
	f.advance(j)
	if j.d.Status != types.JobStatusSucceeded && j.d.Status != types.JobStatusFailed {
		j.terminated = aws.ToString(in.Reason)
		f.advance(j)
	}
	return &awsbatch.TerminateJobOutput{}, nil
}
