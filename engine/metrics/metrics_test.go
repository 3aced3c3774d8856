package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// decode parses each EMF line and checks the directive names every metric
// key of the document with the Service dimension.
func decode(t *testing.T, out string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		aws := doc["_aws"].(map[string]any)
		if _, ok := aws["Timestamp"].(float64); !ok {
			t.Errorf("no Timestamp in %s", line)
		}
		dirs := aws["CloudWatchMetrics"].([]any)
		if len(dirs) != 1 {
			t.Fatalf("directives = %d", len(dirs))
		}
		dir := dirs[0].(map[string]any)
		if dir["Namespace"] != Namespace {
			t.Errorf("namespace %v", dir["Namespace"])
		}
		if got := dir["Dimensions"]; !jsonEqual(got, []any{[]any{DimensionService}}) {
			t.Errorf("dimensions %v", got)
		}
		for _, m := range dir["Metrics"].([]any) {
			name := m.(map[string]any)["Name"].(string)
			if _, ok := doc[name]; !ok {
				t.Errorf("metric %s declared but has no value in %s", name, line)
			}
		}
		docs = append(docs, doc)
	}
	return docs
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestEmit(t *testing.T) {
	var buf bytes.Buffer
	e := New(&buf, ServiceSignals)
	e.now = func() time.Time { return time.UnixMilli(1700000000123) }
	if err := e.Emit(Count(SignalsMatched, 2), Count(SignalsReceived, 3)); err != nil {
		t.Fatal(err)
	}
	docs := decode(t, buf.String())
	if len(docs) != 1 {
		t.Fatalf("want one line, got %q", buf.String())
	}
	d := docs[0]
	if d[DimensionService] != ServiceSignals || d[SignalsMatched] != 2.0 || d[SignalsReceived] != 3.0 {
		t.Errorf("doc = %v", d)
	}
	if ts := d["_aws"].(map[string]any)["Timestamp"]; ts != 1700000000123.0 {
		t.Errorf("timestamp %v", ts)
	}
	units := map[string]string{}
	for _, m := range d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"].([]any) {
		m := m.(map[string]any)
		units[m["Name"].(string)] = m["Unit"].(string)
	}
	if units[SignalsMatched] != "Count" || units[SignalsReceived] != "Count" {
		t.Errorf("units %v", units)
	}
}

// Parse reads back exactly what Emit wrote, as CloudWatch would: the
// namespace, the Service dimension with its value, names, units and values.
func TestParse(t *testing.T) {
	var buf bytes.Buffer
	e := New(&buf, ServiceTimeTrigger)
	if err := e.Emit(Seconds(TriggerLag, 1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	got, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := []Datum{{Namespace: Namespace, Name: TriggerLag, Unit: UnitSeconds,
		Dimensions: map[string]string{DimensionService: ServiceTimeTrigger}, Values: []float64{1.5}}}
	if !jsonEqual(got, want) {
		t.Errorf("Parse = %+v, want %+v", got, want)
	}

	buf.Reset()
	r := NewRecorder(New(&buf, ServiceEngine))
	r.Observe(StepLaunchLatency, UnitMilliseconds, 3)
	r.Observe(StepLaunchLatency, UnitMilliseconds, 3)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err = Parse(buf.Bytes())
	if err != nil || len(got) != 1 || !jsonEqual(got[0].Values, []float64{3}) || !jsonEqual(got[0].Counts, []float64{2}) {
		t.Errorf("distribution: %+v %v", got, err)
	}

	for _, line := range []string{`START RequestId: x`, `{"level":"INFO","msg":"x"}`} {
		if _, err := Parse([]byte(line)); err != ErrNotEMF {
			t.Errorf("Parse(%s) = %v, want ErrNotEMF", line, err)
		}
	}
	for _, line := range []string{
		`{"_aws":{"CloudWatchMetrics":[{"Namespace":"M","Dimensions":[["S"]],"Metrics":[{"Name":"X"}]}]},"S":"s","X":1}`,
		`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"M","Dimensions":[["S"]],"Metrics":[{"Name":"X"}]}]},"S":"s"}`,
		`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"M","Dimensions":[["S"]],"Metrics":[{"Name":"X"}]}]},"X":1}`,
		`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"M","Metrics":[{"Name":"X"}]}]},"X":"one"}`,
	} {
		if _, err := Parse([]byte(line)); err == nil || err == ErrNotEMF {
			t.Errorf("Parse(%s) = %v, want a format error", line, err)
		}
	}
}

// An emitter writes only the metrics its service is listed with, so the
// catalog the CDK app is checked against is what processes really write.
func TestCatalog(t *testing.T) {
	c := Catalog()
	for _, service := range []string{ServiceEngine, ServiceAPI, ServiceTimeTrigger, ServiceSignals, ServicePublisher} {
		if len(c[service]) == 0 {
			t.Errorf("service %s emits nothing", service)
		}
	}
	c[ServiceAPI] = append(c[ServiceAPI], "Changed")
	if Emits(ServiceAPI, "Changed") {
		t.Error("Catalog returned the catalog itself")
	}
	var buf bytes.Buffer
	if err := New(&buf, ServiceTimeTrigger).Emit(Count(PublishFailures, 1)); err == nil || buf.Len() != 0 {
		t.Errorf("the time-trigger emitter wrote a publisher metric: %v %q", err, buf.String())
	}
	if err := New(&buf, ServicePublisher).Emit(Count(PublishFailures, 1)); err != nil {
		t.Error(err)
	}
}

func TestEmitRefusesBadDocuments(t *testing.T) {
	var buf bytes.Buffer
	e := New(&buf, ServiceAPI)
	for name, vals := range map[string][]Value{
		"duplicate": {Count(APIRequests, 1), Count(APIRequests, 2)},
		"reserved":  {Count("_aws", 1)},
		"counts":    {{Name: APILatency, Values: []float64{1, 2}, Counts: []float64{1}}},
		"too many":  {{Name: APILatency, Values: make([]float64, maxValues+1)}},
		"unknown":   {Count("x", 1)},
	} {
		if err := e.Emit(vals...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := e.Emit(); err != nil || buf.Len() != 0 {
		t.Errorf("empty emit wrote %q (%v)", buf.String(), err)
	}
	var nilEmitter *Emitter
	if err := nilEmitter.Emit(Count("x", 1)); err != nil {
		t.Error(err)
	}
}

func TestRecorder(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(New(&buf, ServiceEngine))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				r.Add(StepsEnded, 1)
				r.Observe(StepLaunchLatency, UnitMilliseconds, float64(i%3)+0.5)
			}
		}()
	}
	wg.Wait()
	r.Set(QueueDepth, UnitCount, 7)
	r.Set(QueueDepth, UnitCount, 9)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := decode(t, buf.String())
	if len(docs) != 1 {
		t.Fatalf("docs = %d: %s", len(docs), buf.String())
	}
	d := docs[0]
	if d[StepsEnded] != 800.0 || d[QueueDepth] != 9.0 {
		t.Errorf("counter/gauge: %v", d)
	}
	lat := d[StepLaunchLatency].(map[string]any)
	if !jsonEqual(lat["Values"], []float64{0.5, 1.5, 2.5}) {
		t.Errorf("latency values %v", lat["Values"])
	}
	var total float64
	for _, c := range lat["Counts"].([]any) {
		total += c.(float64)
	}
	if total != 800 {
		t.Errorf("latency counts sum to %v, want 800", total)
	}

	// The next period: the counter is written as 0, the gauge and the
	// distribution are gone.
	buf.Reset()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	d = decode(t, buf.String())[0]
	if d[StepsEnded] != 0.0 || d[QueueDepth] != nil || d[StepLaunchLatency] != nil {
		t.Errorf("second period: %v", d)
	}
}

func TestRecorderSplitsLargeDistributions(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(New(&buf, ServiceEngine))
	for i := range 250 {
		r.Observe(StepLaunchLatency, UnitMilliseconds, float64(10+i)) // 10..259 round to 10..99, 100..260
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := decode(t, buf.String())
	var n, total float64
	for _, d := range docs {
		v := d[StepLaunchLatency].(map[string]any)
		if len(v["Values"].([]any)) > maxValues {
			t.Errorf("a document holds %d values", len(v["Values"].([]any)))
		}
		n += float64(len(v["Values"].([]any)))
		for _, c := range v["Counts"].([]any) {
			total += c.(float64)
		}
	}
	if len(docs) != 2 || total != 250 || n != 90+17 {
		t.Errorf("docs %d, distinct values %v, samples %v", len(docs), n, total)
	}
}

func TestRound2(t *testing.T) {
	for in, want := range map[float64]float64{0: 0, 1.234: 1.2, 12.5: 13, 123: 120, 0.0456: 0.046, 99.6: 100, -3.14: -3.1} {
		if got := round2(in); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("round2(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestRecorderStartStop(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	r := NewRecorder(New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), ServiceEngine))
	sampled := make(chan struct{}, 100)
	if err := r.Start(context.Background(), 10*time.Millisecond, func(context.Context) {
		r.Set(QueueAge, UnitSeconds, 2)
		sampled <- struct{}{}
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sampled:
	case <-time.After(10 * time.Second):
		t.Fatal("never sampled")
	}
	r.Add(GroupTakeovers, 1)
	r.Stop()
	r.Stop()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if !strings.Contains(out, `"QueueAge":2`) || !strings.Contains(out, `"GroupTakeovers":1`) {
		t.Errorf("output %s", out)
	}
	var nilRec *Recorder
	nilRec.Add("x", 1)
	nilRec.Stop()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestHTTP(t *testing.T) {
	var buf bytes.Buffer
	h := HTTP(New(&buf, ServiceAPI), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/boom" {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	for _, p := range []string{"/ok", "/boom"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	docs := decode(t, buf.String())
	if len(docs) != 2 {
		t.Fatalf("docs %d", len(docs))
	}
	if docs[0][APIRequests] != 1.0 || docs[0][APIServerErrors] != 0.0 || docs[1][APIServerErrors] != 1.0 {
		t.Errorf("docs %v", docs)
	}
	if _, ok := docs[1][APILatency].(float64); !ok || docs[1][DimensionService] != ServiceAPI {
		t.Errorf("latency/service: %v", docs[1])
	}
}

// A staged deployment's processes write to its own namespace, which the
// CDK app's alarms read (NamespaceOf): two stages never mix their metrics.
func TestEmitterNamespaceFollowsTheDeployment(t *testing.T) {
	if NamespaceOf("") != Namespace || NamespaceOf("dev") != "Maestro/dev" {
		t.Fatalf("NamespaceOf: %q, %q", NamespaceOf(""), NamespaceOf("dev"))
	}
	for _, tc := range []struct{ env, want string }{{"", Namespace}, {NamespaceOf("dev"), "Maestro/dev"}} {
		t.Setenv(NamespaceEnv, tc.env)
		var buf bytes.Buffer
		if err := New(&buf, ServiceAPI).Emit(Value{Name: APIRequests, Unit: UnitCount, Values: []float64{1}}); err != nil {
			t.Fatal(err)
		}
		got, err := Parse(buf.Bytes())
		if err != nil || len(got) != 1 || got[0].Namespace != tc.want {
			t.Errorf("%s=%q: parsed %+v (%v), want namespace %q", NamespaceEnv, tc.env, got, err, tc.want)
		}
	}
}
