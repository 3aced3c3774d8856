package archiver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/metrics"
	"github.com/maestro-aws/maestro/engine/retention"
	"github.com/maestro-aws/maestro/functions/internal/archiver"
)

type pass struct {
	res retention.Result
	err error
}

func (p pass) Run(context.Context) (retention.Result, error) { return p.res, p.err }

func datum(t *testing.T, line []byte) map[string]float64 {
	t.Helper()
	ds, err := metrics.Parse(bytes.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, d := range ds {
		if d.Dimensions[metrics.DimensionService] != metrics.ServiceArchiver {
			t.Fatalf("dimension %v", d.Dimensions)
		}
		out[d.Name] = d.Values[0]
	}
	return out
}

// TestHandleWritesItsFigures: a pass's counts and lag go out as one EMF
// line; a failed pass is counted and fails the invocation.
func TestHandleWritesItsFigures(t *testing.T) {
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := &archiver.Handler{Pass: pass{res: retention.Result{Runs: 7, Steps: 70, Lag: 90 * time.Second}},
		Metrics: metrics.New(&out, metrics.ServiceArchiver), Logger: logger}
	if res, err := h.Handle(context.Background(), nil); err != nil || res.Runs != 7 {
		t.Fatalf("%+v, %v", res, err)
	}
	got := datum(t, out.Bytes())
	if got[metrics.RunsArchived] != 7 || got[metrics.StepsArchived] != 70 || got[metrics.ArchiveLag] != 90 || got[metrics.ArchiveFailures] != 0 {
		t.Fatalf("metrics %v", got)
	}
	out.Reset()
	h.Pass = pass{res: retention.Result{Runs: 2}, err: errors.New("database gone")}
	if _, err := h.Handle(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "database gone") {
		t.Fatalf("a failed pass answered %v", err)
	}
	got = datum(t, out.Bytes())
	if got[metrics.ArchiveFailures] != 1 || got[metrics.RunsArchived] != 2 {
		t.Fatalf("metrics of a failed pass %v", got)
	}
	if _, ok := got[metrics.ArchiveLag]; ok {
		t.Fatal("a failed pass reported a lag")
	}
}
