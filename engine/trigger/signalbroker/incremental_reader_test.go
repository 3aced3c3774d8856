package signalbroker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/maestro-aws/maestro/engine/tablechange"
)

// fakeReader is an in-memory table reader: each snapshot added the files
// files(snapshot) lists; fail makes it fail.
type fakeReader struct {
	mu    sync.Mutex
	fail  bool
	files map[int64]int
	asked []tablechange.Range
}

func (r *fakeReader) Changes(_ context.Context, rg tablechange.Range) (tablechange.Changes, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, rg)
	if r.fail {
		return tablechange.Changes{}, errors.New("catalog unreachable")
	}
	var out tablechange.Changes
	for i := 1; i <= 10; i++ {
		c := commit(i)
		if c.CommitTime.After(rg.ToCommitTime) || (rg.FromSnapshotID != 0 && !c.CommitTime.After(rg.FromCommitTime)) {
			continue
		}
		for f := 0; f < r.files[c.SnapshotID]; f++ {
			out.AddedFiles = append(out.AddedFiles, tablechange.DataFile{Path: fmt.Sprintf("s3://wh/orders/%d-%d.parquet", i, f),
				Records: 10, SnapshotID: c.SnapshotID})
		}
	}
	return out, nil
}

// runParam reads one run param's value as JSON.
func runParam(t *testing.T, raw []byte, name string) any {
	t.Helper()
	var ps map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(raw, &ps); err != nil {
		t.Fatal(err)
	}
	p, ok := ps[name]
	if !ok {
		return nil
	}
	return p.Value
}

// With a table reader, a run gets the files its range added (at most
// 1,000 paths; a manifest of all of them beyond); without one, no added_*
// params. A reader that fails starts no run: the range stays due and the
// sweep starts it once the reader answers.
func TestIncrementalAddedFilesFromTheReader(t *testing.T) {
	t.Parallel()
	g := newGate()
	g.auto = true
	e := newEnv(t).withGate(g)
	e.Push(incrementalWorkflow("incr-files"))
	reader := &fakeReader{files: map[int64]int{commit(1).SnapshotID: 2, commit(2).SnapshotID: 1, commit(3).SnapshotID: 1001}}
	var (
		mu        sync.Mutex
		manifests []string
	)
	e.broker.SetTableReader(reader, func(_ context.Context, key string, r tablechange.Range, files []tablechange.DataFile) (string, error) {
		uri := fmt.Sprintf("s3://manifests/%s/%d.json", key, len(files))
		mu.Lock()
		manifests = append(manifests, uri)
		mu.Unlock()
		return uri, nil
	})

	e.announce(changeSignal(commit(1)))
	first := e.runs("incr-files")[0]
	if got := runParam(t, first.RunParams, "added_files"); fmt.Sprint(got) != "[s3://wh/orders/1-0.parquet s3://wh/orders/1-1.parquet]" {
		t.Errorf("added_files %v", got)
	}
	if runParam(t, first.RunParams, "added_files_count") != float64(2) || runParam(t, first.RunParams, "added_records") != float64(20) ||
		runParam(t, first.RunParams, "added_files_manifest") != "" {
		t.Errorf("run params %s", first.RunParams)
	}
	waitFor(t, "watermark at 1", func() bool { return e.watermark("incr-files").SnapshotID == commit(1).SnapshotID })

	// The reader fails: the change is recorded, no run starts; the sweep
	// starts it once the reader answers, with the range's files.
	reader.mu.Lock()
	reader.fail = true
	reader.mu.Unlock()
	if _, stats := e.announce(changeSignal(commit(2))); stats.Started != 0 {
		t.Fatalf("a run started though the reader failed: %+v", stats)
	}
	e.sweeper.Sweep(context.Background())
	if n := len(e.runs("incr-files")); n != 1 {
		t.Fatalf("%d runs while the reader fails", n)
	}
	reader.mu.Lock()
	reader.fail = false
	reader.mu.Unlock()
	second := e.waitRuns("incr-files", 2)[1]
	if r := e.rangeOf(second); r.From != commit(1).SnapshotID || r.To != commit(2).SnapshotID || r.Count != 1 ||
		runParam(t, second.RunParams, "added_files_count") != float64(1) {
		t.Errorf("range the sweep started once the reader recovered %+v, params %s", r, second.RunParams)
	}
	waitFor(t, "watermark at 2", func() bool { return e.watermark("incr-files").SnapshotID == commit(2).SnapshotID })

	// 1,001 files: 1,000 paths and the manifest of all.
	e.announce(changeSignal(commit(3)))
	third := e.waitRuns("incr-files", 3)[2]
	paths, _ := runParam(t, third.RunParams, "added_files").([]any)
	mu.Lock()
	written := slices.Clone(manifests)
	mu.Unlock()
	if len(paths) != 1000 || runParam(t, third.RunParams, "added_files_count") != float64(1001) ||
		runParam(t, third.RunParams, "added_records") != float64(10010) || len(written) != 1 ||
		runParam(t, third.RunParams, "added_files_manifest") != written[0] {
		t.Errorf("a range of 1,001 files: %d paths, count %v, manifest %v (written %v)", len(paths),
			runParam(t, third.RunParams, "added_files_count"), runParam(t, third.RunParams, "added_files_manifest"), written)
	}

	// Without a reader: no added_* params.
	plain := newEnv(t).withGate(g)
	plain.Push(incrementalWorkflow("incr-nofiles"))
	plain.announce(changeSignal(commit(1)))
	if p := plain.runs("incr-nofiles")[0].RunParams; runParam(t, p, "added_files") != nil || runParam(t, p, "added_files_count") != nil {
		t.Errorf("added_* params without a reader: %s", p)
	}
}
