// Package emrtest is an in-memory EMR cluster for tests of the Emr runtime
// in an engine process: Fake implements emr.API (AddJobFlowSteps,
// DescribeStep, ListSteps newest first, CancelSteps) and Handler serves it
// over EMR's JSON protocol (awsJson1_1, X-Amz-Target
// ElasticMapReduce.<operation>), so that the real SDK client of an engine
// process can call it through a custom endpoint.
//
// Unlike the emulator's EMR, whose steps complete the moment they are
// added, a fake step is PENDING, then RUNNING for the duration its args
// name ("--run-for=3s"), then COMPLETED (FAILED with "--fail").
package emrtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsemr "github.com/aws/aws-sdk-go-v2/service/emr"
	"github.com/aws/aws-sdk-go-v2/service/emr/types"
	"github.com/aws/smithy-go"
)

// Fake is an in-memory EMR cluster; the zero value is not usable, call New.
type Fake struct {
	// AddAnswerDelay holds Handler's answer to AddJobFlowSteps (the step
	// is already added) for a while, so that a killed caller loses it.
	AddAnswerDelay time.Duration

	mu          sync.Mutex
	steps       []*step // oldest first
	added       map[string]int
	calls       map[string]int
	lostAnswers int
}

type step struct {
	s      types.Step
	added  time.Time
	runFor time.Duration
	fail   bool
}

// New returns an empty cluster.
func New() *Fake { return &Fake{added: map[string]int{}, calls: map[string]int{}} }

// Added returns how many EMR steps were added per step name.
func (f *Fake) Added() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.added)
}

// Calls returns how many times op was called.
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// LostAnswers returns how many AddJobFlowSteps answers Handler never
// delivered.
func (f *Fake) LostAnswers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lostAnswers
}

func clientError(code, msg string) error {
	return &smithy.GenericAPIError{Code: code, Message: msg, Fault: smithy.FaultClient}
}

// AddJobFlowSteps implements emr.API.
func (f *Fake) AddJobFlowSteps(_ context.Context, in *awsemr.AddJobFlowStepsInput, _ ...func(*awsemr.Options)) (*awsemr.AddJobFlowStepsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["AddJobFlowSteps"]++
	out := &awsemr.AddJobFlowStepsOutput{}
	for _, sc := range in.Steps {
		if sc.HadoopJarStep == nil {
			return nil, clientError("ValidationException", "HadoopJarStep is required")
		}
		id := fmt.Sprintf("s-%05d", len(f.steps)+1)
		st := &step{added: time.Now(), s: types.Step{Id: aws.String(id), Name: sc.Name, ActionOnFailure: sc.ActionOnFailure,
			Config: &types.HadoopStepConfig{Jar: sc.HadoopJarStep.Jar, Args: sc.HadoopJarStep.Args},
			Status: &types.StepStatus{State: types.StepStatePending}}}
		for _, a := range sc.HadoopJarStep.Args {
			if d, ok := strings.CutPrefix(a, "--run-for="); ok {
				st.runFor, _ = time.ParseDuration(d)
			}
			st.fail = st.fail || a == "--fail"
		}
		f.steps = append(f.steps, st)
		f.added[aws.ToString(sc.Name)]++
		out.StepIds = append(out.StepIds, id)
	}
	return out, nil
}

func (f *Fake) advance(st *step) {
	switch st.s.Status.State {
	case types.StepStatePending, types.StepStateRunning:
	default:
		return
	}
	age := time.Since(st.added)
	switch {
	case age >= st.runFor+50*time.Millisecond && st.fail:
		st.s.Status.State = types.StepStateFailed
		st.s.Status.FailureDetails = &types.FailureDetails{Reason: aws.String("Unknown Error."), Message: aws.String("the job exited 1")}
	case age >= st.runFor+50*time.Millisecond:
		st.s.Status.State = types.StepStateCompleted
	case age >= 50*time.Millisecond:
		st.s.Status.State = types.StepStateRunning
	}
}

func (f *Fake) find(id string) *step {
	for _, st := range f.steps {
		if aws.ToString(st.s.Id) == id {
			return st
		}
	}
	return nil
}

// DescribeStep implements emr.API.
func (f *Fake) DescribeStep(_ context.Context, in *awsemr.DescribeStepInput, _ ...func(*awsemr.Options)) (*awsemr.DescribeStepOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["DescribeStep"]++
	st := f.find(aws.ToString(in.StepId))
	if st == nil {
		return nil, clientError("InvalidRequestException", "Step id '"+aws.ToString(in.StepId)+"' is not valid.")
	}
	f.advance(st)
	cp := st.s
	status := *st.s.Status
	cp.Status = &status
	return &awsemr.DescribeStepOutput{Step: &cp}, nil
}

// ListSteps implements emr.API: newest first, 50 a page.
func (f *Fake) ListSteps(_ context.Context, in *awsemr.ListStepsInput, _ ...func(*awsemr.Options)) (*awsemr.ListStepsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ListSteps"]++
	start := 0
	if in.Marker != nil {
		fmt.Sscan(aws.ToString(in.Marker), &start)
	}
	out := &awsemr.ListStepsOutput{}
	for i := len(f.steps) - 1 - start; i >= 0 && len(out.Steps) < 50; i-- {
		st := f.steps[i]
		f.advance(st)
		status := *st.s.Status
		out.Steps = append(out.Steps, types.StepSummary{Id: st.s.Id, Name: st.s.Name, Status: &status})
	}
	if next := start + len(out.Steps); next < len(f.steps) {
		out.Marker = aws.String(fmt.Sprint(next))
	}
	return out, nil
}

// CancelSteps implements emr.API.
func (f *Fake) CancelSteps(_ context.Context, in *awsemr.CancelStepsInput, _ ...func(*awsemr.Options)) (*awsemr.CancelStepsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["CancelSteps"]++
	out := &awsemr.CancelStepsOutput{}
	for _, id := range in.StepIds {
		st := f.find(id)
		if st == nil {
			continue
		}
		f.advance(st)
		info := types.CancelStepsInfo{StepId: st.s.Id, Status: types.CancelStepsRequestStatusSubmitted}
		if s := st.s.Status.State; s == types.StepStatePending || s == types.StepStateRunning {
			st.s.Status.State = types.StepStateCancelled
		} else {
			info.Status, info.Reason = types.CancelStepsRequestStatusFailed, aws.String("step is "+string(s))
		}
		out.CancelStepsInfoList = append(out.CancelStepsInfoList, info)
	}
	return out, nil
}

// Handler serves the fake over EMR's JSON protocol.
func (f *Fake) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Header.Get("X-Amz-Target")
		op := target[strings.LastIndex(target, ".")+1:]
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, err)
			return
		}
		var out any
		switch op {
		case "AddJobFlowSteps":
			out, err = call(r.Context(), body, f.AddJobFlowSteps)
			if err == nil && f.AddAnswerDelay > 0 {
				select {
				case <-time.After(f.AddAnswerDelay):
				case <-r.Context().Done():
					f.mu.Lock()
					f.lostAnswers++
					f.mu.Unlock()
					return
				}
			}
		case "DescribeStep":
			out, err = call(r.Context(), body, f.DescribeStep)
		case "ListSteps":
			out, err = call(r.Context(), body, f.ListSteps)
		case "CancelSteps":
			out, err = call(r.Context(), body, f.CancelSteps)
		default:
			err = clientError("UnknownOperationException", "unsupported operation "+op)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		// The SDK's types carry EMR's member names; only the result
		// metadata is not a member.
		b, err := json.Marshal(out)
		if err != nil {
			writeError(w, err)
			return
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		delete(m, "ResultMetadata")
		b, _ = json.Marshal(m)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write(b)
	})
}

func call[In, Out any](ctx context.Context, body []byte, fn func(context.Context, *In, ...func(*awsemr.Options)) (*Out, error)) (any, error) {
	var in In
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, clientError("SerializationException", err.Error())
	}
	return fn(ctx, &in)
}

func writeError(w http.ResponseWriter, err error) {
	code, status := "InternalServerError", http.StatusInternalServerError
	var api smithy.APIError
	if errors.As(err, &api) {
		code = api.ErrorCode()
		if api.ErrorFault() != smithy.FaultServer {
			status = http.StatusBadRequest
		}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"__type": code, "message": fmt.Sprint(err)})
	_, _ = w.Write(b)
}
