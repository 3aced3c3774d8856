package flowstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/instance"
)

// Concurrent reads of output data are answered together, each with its
// own attempt's params: the attempt with output data gets them, one
// without (or unknown) gets nil, however the reads are gathered. A reader
// whose context ends stops waiting; the reads after it are answered.
func TestReadOutputDataAnswersEachGatheredRead(t *testing.T) {
	db, s, ref, _ := writerFixture(t)
	ctx := context.Background()
	const with, without = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
	if _, err := db.Exec(ctx, `INSERT INTO step_output_data (step_uuid, workflow_id, instance_id, run_id, step_id, attempt_id, params)
        VALUES ($1, $2, $3, 1, 's', 1, '{"x": {"type": "LONG", "value": 7}}')`, with, ref.WorkflowID, ref.InstanceID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 600)
	for i := range 600 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uuid := []string{with, without, fmt.Sprintf("00000000-0000-0000-0001-%012d", i)}[i%3]
			got, err := s.ReadOutputData(ctx, uuid)
			switch {
			case err != nil:
				errs <- err
			case uuid == with && string(got) != `{"x": {"type": "LONG", "value": 7}}`:
				errs <- fmt.Errorf("read %d of %s: %s, want its output data", i, uuid, got)
			case uuid != with && got != nil:
				errs <- fmt.Errorf("read %d of %s: %s, want nil", i, uuid, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.ReadOutputData(done, with); !errors.Is(err, context.Canceled) {
		t.Errorf("read with an ended context: %v, want context.Canceled", err)
	}
	if got, err := s.ReadOutputData(ctx, with); err != nil || got == nil {
		t.Errorf("read after it: %s, %v", got, err)
	}
}

// Reads that follow one another within the reader's linger are answered
// by the same reader goroutine; once none has come for the linger it
// ends, and the next read starts another.
func TestOutputReaderServesReadsThatFollowOneAnother(t *testing.T) {
	_, s, _, _ := writerFixture(t)
	ctx := context.Background()
	readers := func() (int, bool) {
		s.outputs.mu.Lock()
		defer s.outputs.mu.Unlock()
		return s.outputs.readers, s.outputs.inflight
	}
	const reads = 20
	for i := range reads {
		if got, err := s.ReadOutputData(ctx, fmt.Sprintf("00000000-0000-0000-0002-%012d", i)); err != nil || got != nil {
			t.Fatalf("read %d: %s, %v", i, got, err)
		}
	}
	// One goroutine for them all on a quiet machine; a loaded one may
	// pause past the linger now and then.
	if n, _ := readers(); n > reads/4 {
		t.Fatalf("%d reads one after another started %d readers", reads, n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, running := readers(); !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader did not end after its linger")
		}
		time.Sleep(time.Millisecond)
	}
	before, _ := readers()
	if _, err := s.ReadOutputData(ctx, "00000000-0000-0000-0002-000000000099"); err != nil {
		t.Fatal(err)
	}
	if after, _ := readers(); after != before+1 {
		t.Fatalf("a read after the reader ended started %d readers, want 1", after-before)
	}
}

// An update that sends no params keeps the stored ones; one that sends a
// patch sets its keys on them, replacing those it names, as
// params.MergeOutputs merges output params in memory; one that sends
// params replaces them all.
func TestStepUpdateKeepsOrPatchesItsParams(t *testing.T) {
	db, s, ref, _ := writerFixture(t)
	ctx := context.Background()
	stored := func() string {
		t.Helper()
		var p string
		if err := db.QueryRow(ctx, `SELECT params::text FROM step_instance WHERE workflow_id = $1 AND instance_id = $2 AND step_id = 's'`,
			ref.WorkflowID, ref.InstanceID).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(seq int64, w StepWrite) {
		t.Helper()
		w.Status, w.Seq, w.Timeline = instance.StepRunning, seq, []instance.TimelineEvent{}
		if err := s.Write(ctx, UpdateStepOp(ctx, ref, 0, 5, "s", 1, w)); err != nil {
			t.Fatal(err)
		}
	}
	write(2, StepWrite{Params: []byte(`{"a": {"type": "LONG", "value": 1}, "b": {"type": "STRING", "value": "x"}}`)})
	write(3, StepWrite{})
	if got, want := stored(), `{"a": {"type": "LONG", "value": 1}, "b": {"type": "STRING", "value": "x"}}`; got != want {
		t.Errorf("after an update without params: %s, want %s", got, want)
	}
	write(4, StepWrite{ParamsPatch: []byte(`{"b": {"type": "STRING", "value": "y"}, "c": {"type": "LONG", "value": 3}}`)})
	if got, want := stored(), `{"a": {"type": "LONG", "value": 1}, "b": {"type": "STRING", "value": "y"}, "c": {"type": "LONG", "value": 3}}`; got != want {
		t.Errorf("after a patch: %s, want %s", got, want)
	}
	write(5, StepWrite{Params: []byte(`{"d": {"type": "LONG", "value": 4}}`)})
	if got, want := stored(), `{"d": {"type": "LONG", "value": 4}}`; got != want {
		t.Errorf("after params: %s, want %s", got, want)
	}
}
