package incremental

import (
	"fmt"
	"testing"

	"github.com/maestro-aws/maestro/engine/tablechange"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// A range from the table's beginning has from_commit_time 0 whatever the
// plan holds; the added_* params appear only with a reader's answer, with
// at most MaxAddedFiles paths and the count and rows of all of them.
func TestRunParams(t *testing.T) {
	p := Planned{Key: Key{WorkflowID: "wf", Table: "sales.orders"}, FromSnapshotID: 0, FromCommitTime: 99,
		ToSnapshotID: 42, ToCommitTime: 1000, SnapshotCount: 3, HasDelete: true}
	ps := RunParams(p, nil)
	want := map[string]any{ParamTable: "sales.orders", ParamFromSnapshotID: int64(0), ParamToSnapshotID: int64(42),
		ParamFromCommitTime: int64(0), ParamToCommitTime: int64(1000), ParamHasOverwrite: false, ParamHasDelete: true,
		ParamSnapshotCount: int64(3)}
	if len(ps) != len(want) {
		t.Fatalf("params %v", ps)
	}
	for k, v := range want {
		if ps[k].Value != v {
			t.Errorf("%s = %v, want %v", k, ps[k].Value, v)
		}
	}
	if ps[ParamTable].Type != workflow.ParamTypeString || ps[ParamHasDelete].Type != workflow.ParamTypeBoolean ||
		ps[ParamToSnapshotID].Type != workflow.ParamTypeLong {
		t.Errorf("types %v", ps)
	}
	files := make([]tablechange.DataFile, MaxAddedFiles+5)
	for i := range files {
		files[i] = tablechange.DataFile{Path: fmt.Sprintf("s3://b/%d", i), Records: 2}
	}
	ps = RunParams(p, &Added{Files: files, Manifest: "s3://m/1.json"})
	if paths := ps[ParamAddedFiles].Value.([]any); len(paths) != MaxAddedFiles || paths[0] != "s3://b/0" {
		t.Errorf("added_files has %d paths", len(paths))
	}
	if ps[ParamAddedFilesCount].Value != int64(MaxAddedFiles+5) || ps[ParamAddedRecords].Value != int64(2*(MaxAddedFiles+5)) ||
		ps[ParamAddedFilesManifest].Value != "s3://m/1.json" || ps[ParamAddedFiles].Type != workflow.ParamTypeStringArray {
		t.Errorf("added params %v %v %v", ps[ParamAddedFilesCount], ps[ParamAddedRecords], ps[ParamAddedFilesManifest])
	}
	p.FromSnapshotID = 7
	if RunParams(p, nil)[ParamFromCommitTime].Value != int64(99) || Initiator(p)[ParamFromCommitTime] != int64(99) {
		t.Error("from_commit_time of a range after a snapshot")
	}
}

func TestRangeValue(t *testing.T) {
	from, to, err := ParseRangeValue(RangeValue(0, 9_007_199_254_740_993))
	if err != nil || from != 0 || to != 9_007_199_254_740_993 {
		t.Fatalf("round trip: %d %d %v", from, to, err)
	}
	for _, bad := range []string{"", "1", "1..", "..2", "a..b", "1-2"} {
		if _, _, err := ParseRangeValue(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
