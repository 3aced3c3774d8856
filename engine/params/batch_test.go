package params_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// TestBatchEvaluatesAsEachRunAlone: each run of a batch gets exactly the
// values (and the JSON) EvaluateWorkflow gives it alone, whether a param
// is shared, reads a varying param (an expression, an interpolated
// literal, through another param) or reads the instance id.
func TestBatchEvaluatesAsEachRunAlone(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
	wf := &workflow.Workflow{ID: "wf:1:loop", Params: workflow.Params{
		"shared":  str("x"),
		"doubled": expr(workflow.ParamTypeLong, "a * 2"),
		"chain":   expr(workflow.ParamTypeLong, "doubled + 1"),
		"label":   str("item-${b}"),
		"which":   expr(workflow.ParamTypeLong, `params.getFromInstance("workflow_instance_id")`),
		"checked": {Type: workflow.ParamTypeString, Value: "ok", Validator: "param != ''"},
	}}
	base := workflow.Params{"inherited": str("p$$q"), "RUN_DATE": str("20250101")}
	initiator := map[string]any{"type": "FOREACH"}
	varying := []string{"a", "b", "loop_index"}
	iter := func(i int64) workflow.Params {
		rp := maps.Clone(base)
		rp["a"] = lit(workflow.ParamTypeLong, i*10)
		rp["b"] = str("v" + string(rune('a'+i)))
		rp["loop_index"] = lit(workflow.ParamTypeLong, i-1)
		return rp
	}
	in := params.WorkflowInput{Workflow: wf, RunParams: iter(1), InstanceID: 1, RunID: 2, Now: now,
		Initiator: initiator, Owner: "alice"}
	b, err := params.NewBatch(ctx, in, varying)
	if err != nil {
		t.Fatal(err)
	}
	var firstShared []byte
	for i := int64(1); i <= 3; i++ {
		rp := iter(i)
		own := workflow.Params{"a": rp["a"], "b": rp["b"], "loop_index": rp["loop_index"]}
		got, raw, err := evaluateJoined(ctx, b, i, own)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		alone := in
		alone.RunParams, alone.InstanceID = rp, i
		want, err := params.EvaluateWorkflow(ctx, alone)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: batch\n%v\nalone\n%v", i, got, want)
		}
		var decoded params.Values
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Fatalf("run %d: JSON %s: %v", i, raw, err)
		}
		wantJSON, _ := json.Marshal(want)
		var wantDecoded params.Values
		_ = json.Unmarshal(wantJSON, &wantDecoded)
		if !reflect.DeepEqual(decoded, wantDecoded) {
			t.Fatalf("run %d: JSON\n%s\nwant\n%s", i, raw, wantJSON)
		}
		// The split form: the shared object, one slice for every run, and
		// the run's own, with no name in both, are together the same values.
		_, shared, ownJSON, err := b.EvaluateSplit(ctx, i, own)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if i > 1 && (len(shared) == 0 || &shared[0] != &firstShared[0]) {
			t.Fatalf("run %d: the shared object is not the batch's one slice", i)
		}
		firstShared = shared
		var sharedVals, ownVals params.Values
		if err := json.Unmarshal(shared, &sharedVals); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ownJSON, &ownVals); err != nil {
			t.Fatal(err)
		}
		for name, v := range ownVals {
			if _, both := sharedVals[name]; both {
				t.Fatalf("run %d: %s is both shared and its own", i, name)
			}
			sharedVals[name] = v
		}
		if !reflect.DeepEqual(sharedVals, wantDecoded) {
			t.Fatalf("run %d: split JSON\n%s + %s\nwant\n%s", i, shared, ownJSON, wantJSON)
		}
		if got["doubled"].Value != i*20 || got["chain"].Value != i*20+1 || got["which"].Value != i || got["owner"].Value != "alice" {
			t.Fatalf("run %d: doubled %v chain %v which %v owner %v", i, got["doubled"].Value, got["chain"].Value, got["which"].Value, got["owner"].Value)
		}
	}
}

// TestBatchRefusesWhatARunWouldRefuse: a reserved name or a param the
// batch was not told varies is an error, as is an override of a
// constant.
func TestBatchRefusesWhatARunWouldRefuse(t *testing.T) {
	ctx := context.Background()
	wf := &workflow.Workflow{ID: "w", Params: workflow.Params{
		"fixed": {Type: workflow.ParamTypeLong, Value: int64(1), Mode: workflow.ParamModeConstant}}}
	in := params.WorkflowInput{Workflow: wf, InstanceID: 1, RunID: 1,
		RunParams: workflow.Params{"a": lit(workflow.ParamTypeLong, int64(1))}}
	b, err := params.NewBatch(ctx, in, []string{"a", "fixed"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := evaluateJoined(ctx, b, 2, workflow.Params{"other": str("x")}); err == nil {
		t.Fatal("a param the batch does not vary was accepted")
	}
	_, _, err = evaluateJoined(ctx, b, 2, workflow.Params{"fixed": lit(workflow.ParamTypeLong, int64(2))})
	if !errors.Is(err, params.ErrNotOverridable) {
		t.Fatalf("override of a constant: %v, want ErrNotOverridable", err)
	}
	got, _, err := evaluateJoined(ctx, b, 2, workflow.Params{"a": lit(workflow.ParamTypeLong, int64(7))})
	if err != nil || got["a"].Value != int64(7) || got["fixed"].Value != int64(1) || got[params.WorkflowInstanceID].Value != int64(2) {
		t.Fatalf("got %v, %v", got, err)
	}
	sig := &workflow.Workflow{ID: "s", Params: workflow.Params{
		"s": expr(workflow.ParamTypeString, `params.getFromSignal("sig", "p")`)}}
	if _, err := params.NewBatch(ctx, params.WorkflowInput{Workflow: sig}, nil); err == nil {
		t.Fatal("a batch whose params read signals was made")
	}
}

// evaluateJoined is EvaluateSplit with the two objects joined into one, as
// the database stores them (run.Local.ParamsBase): the run's whole params.
func evaluateJoined(ctx context.Context, b *params.Batch, instanceID int64, runParams workflow.Params) (params.Values, []byte, error) {
	vals, shared, own, err := b.EvaluateSplit(ctx, instanceID, runParams)
	if err != nil || len(shared) == 0 {
		return vals, own, err
	}
	raw := append(append(append([]byte{}, shared[:len(shared)-1]...), ','), own[1:]...) // own has workflow_instance_id at least
	return vals, raw, nil
}
