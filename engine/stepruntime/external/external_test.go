package external_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/external"
)

// job is a scripted Job that counts its calls.
type job struct {
	launch   func() stepruntime.Result
	found    bool
	findErr  error
	launches int
	finds    int
	cancels  int
}

func (j *job) Check(*stepruntime.Attempt) error { return nil }

func (j *job) Launch(context.Context, *stepruntime.Attempt, string) stepruntime.Result {
	j.launches++
	return j.launch()
}

func (j *job) Find(context.Context, *stepruntime.Attempt, string) (stepruntime.Result, bool, error) {
	j.finds++
	return stepruntime.Result{State: stepruntime.Continue, Data: map[string]any{"id": "found"}}, j.found, j.findErr
}

func (j *job) Poll(context.Context, *stepruntime.Attempt) stepruntime.Result {
	return stepruntime.Result{State: stepruntime.Done}
}

func (j *job) Cancel(_ context.Context, a *stepruntime.Attempt) stepruntime.Result {
	j.cancels++
	return stepruntime.Result{State: stepruntime.Stopped, Message: "cancelled " + a.Data["id"].(string)}
}

func attempt() *stepruntime.Attempt {
	return &stepruntime.Attempt{UUID: "k1", Record: func(context.Context, map[string]any) error { return nil }}
}

// A launch whose outcome stays unknown is looked up and tried again with
// the same key, at most MaxLaunchTries times; then the attempt fails.
func TestUnknownLaunchesAreBounded(t *testing.T) {
	j := &job{launch: func() stepruntime.Result { return external.Unknown(stepruntime.Continue, 0, "lost") }}
	rt := external.Runtime{Job: j}
	a := attempt()
	var r stepruntime.Result
	for range 2 * external.MaxLaunchTries {
		r = rt.Execute(context.Background(), a)
		a.Data = r.Data
		if r.State != stepruntime.Continue {
			break
		}
	}
	if r.State != stepruntime.PlatformError || j.launches != external.MaxLaunchTries || j.finds != external.MaxLaunchTries {
		t.Fatalf("state %s after %d launches and %d lookups: %s", r.State, j.launches, j.finds, r.Message)
	}
}

// A failed lookup launches nothing and tries again later.
func TestFailedLookupLaunchesNothing(t *testing.T) {
	j := &job{findErr: errors.New("throttled")}
	a := attempt()
	a.Data = map[string]any{external.KeyLaunch: external.LaunchIntended, external.KeyIdempotency: "k1"}
	r := external.Runtime{Job: j}.Execute(context.Background(), a)
	if r.State != stepruntime.Continue || j.launches != 0 || !strings.Contains(r.Message, "throttled") {
		t.Fatalf("state %s, %d launches: %s", r.State, j.launches, r.Message)
	}
}

// A stop while the outcome is unknown cancels what the lookup finds.
func TestTerminateCancelsWhatItFinds(t *testing.T) {
	j := &job{found: true}
	a := attempt()
	a.Data = map[string]any{external.KeyLaunch: external.LaunchIntended, external.KeyIdempotency: "k1"}
	r := external.Runtime{Job: j}.Terminate(context.Background(), a)
	if r.State != stepruntime.Stopped || j.cancels != 1 || r.Message != "cancelled found" {
		t.Fatalf("state %s, %d cancels: %s", r.State, j.cancels, r.Message)
	}
}

// An attempt that is ending launches nothing.
func TestEndingAttemptLaunchesNothing(t *testing.T) {
	j := &job{launch: func() stepruntime.Result { return stepruntime.Result{State: stepruntime.Done} }}
	a := attempt()
	a.Record = func(context.Context, map[string]any) error { return stepruntime.ErrAttemptEnding }
	if r := (external.Runtime{Job: j}).Execute(context.Background(), a); r.State != stepruntime.Continue || j.launches != 0 {
		t.Fatalf("state %s, %d launches", r.State, j.launches)
	}
}
