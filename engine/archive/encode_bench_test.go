package archive_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/archive"
)

// benchRecord is shaped like an archived run: rows as PostgreSQL's
// row_to_json writes them, with jsonb columns in jsonb's spaced text.
type benchRecord struct {
	Format string            `json:"format"`
	Run    json.RawMessage   `json:"run"`
	Steps  []json.RawMessage `json:"steps"`
}

func benchRecords(n int) []benchRecord {
	params := `{"p": {"type": "STRING", "value": "` + strings.Repeat("x", 200) + `", "evaluated_result": "x"}, "q": {"type": "LONG", "value": 1}}`
	out := make([]benchRecord, n)
	for i := range out {
		r := benchRecord{Format: "maestro-run/1",
			Run: json.RawMessage(fmt.Sprintf(`{"workflow_id":"wf","instance_id":%d,"run_id":1,"status":"SUCCEEDED","params":%s,"timeline":[{"type": "LOG", "message": "done"}]}`, i, params))}
		for s := 0; s < 10; s++ {
			r.Steps = append(r.Steps, json.RawMessage(fmt.Sprintf(`{"step_id":"s%d","attempt_id":1,"status":"SUCCEEDED","params":%s,"artifacts":{}}`, s, params)))
		}
		out[i] = r
	}
	return out
}

// BenchmarkEncode: a batch of 500 archived runs of 10 steps each, the
// archiver's batch size.
func BenchmarkEncode(b *testing.B) {
	records := benchRecords(500)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := archive.Encode(records); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(records)), "µs/run")
}
