package metrics

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
)

// Recorder aggregates observations in memory and writes them with its
// Emitter once a period, for a long-running process whose per-event lines
// would flood its log. Counters that were used once are written every period,
// zero included, so that an alarm sees 0 rather than missing data. It is safe
// for concurrent use; a nil Recorder discards everything.
type Recorder struct {
	e *Emitter

	mu     sync.Mutex
	counts map[string]float64
	gauges map[string]Value
	dists  map[string]*dist

	startOnce sync.Once
	stopOnce  sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
}

// dist counts observed values, rounded to two significant digits so that a
// period's samples fit in few EMF values.
type dist struct {
	unit   Unit
	counts map[float64]float64
}

// NewRecorder returns a Recorder writing through e.
func NewRecorder(e *Emitter) *Recorder {
	return &Recorder{e: e, counts: map[string]float64{}, gauges: map[string]Value{}, dists: map[string]*dist{}}
}

// Add adds n to the counter name.
func (r *Recorder) Add(name string, n float64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.counts[name] += n
	r.mu.Unlock()
}

// Set records the current value of the gauge name; the last value of a
// period is written.
func (r *Recorder) Set(name string, unit Unit, v float64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.gauges[name] = Value{Name: name, Unit: unit, Values: []float64{v}}
	r.mu.Unlock()
}

// Observe adds one sample of the distribution name (a latency, say);
// CloudWatch computes percentiles over the samples.
func (r *Recorder) Observe(name string, unit Unit, v float64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	d := r.dists[name]
	if d == nil {
		d = &dist{unit: unit, counts: map[float64]float64{}}
		r.dists[name] = d
	}
	d.counts[round2(v)]++
	r.mu.Unlock()
}

// round2 rounds v to two significant digits.
func round2(v float64) float64 {
	if v == 0 {
		return 0
	}
	scale := 1.0
	a := v
	if a < 0 {
		a = -a
	}
	for a >= 100 {
		a /= 10
		scale *= 10
	}
	for a < 10 {
		a *= 10
		scale /= 10
	}
	n := float64(int64(a + 0.5))
	if v < 0 {
		n = -n
	}
	return n * scale
}

// Flush writes what was recorded since the last Flush and resets it.
// Gauges are written once and forgotten; counters are kept at zero.
func (r *Recorder) Flush() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	var doc []Value
	for _, name := range slices.Sorted(maps.Keys(r.counts)) {
		doc = append(doc, Count(name, r.counts[name]))
		r.counts[name] = 0
	}
	for _, name := range slices.Sorted(maps.Keys(r.gauges)) {
		doc = append(doc, r.gauges[name])
	}
	clear(r.gauges)
	// A distribution may need several documents (EMF allows maxValues
	// values per metric in one).
	var extra [][]Value
	for _, name := range slices.Sorted(maps.Keys(r.dists)) {
		d := r.dists[name]
		vals := slices.Sorted(maps.Keys(d.counts))
		for i := 0; i < len(vals); i += maxValues {
			chunk := vals[i:min(i+maxValues, len(vals))]
			v := Value{Name: name, Unit: d.unit, Values: chunk, Counts: make([]float64, len(chunk))}
			for j, x := range chunk {
				v.Counts[j] = d.counts[x]
			}
			if i == 0 {
				doc = append(doc, v)
			} else {
				extra = append(extra, []Value{v})
			}
		}
	}
	clear(r.dists)
	r.mu.Unlock()

	errs := []error{r.e.Emit(doc...)}
	for _, d := range extra {
		errs = append(errs, r.e.Emit(d...))
	}
	return errors.Join(errs...)
}

// Start flushes every interval (60 s when zero) until Stop, calling sample
// first each time so that gauges are current. It returns at once.
func (r *Recorder) Start(ctx context.Context, interval time.Duration, sample func(context.Context)) error {
	if r == nil {
		return nil
	}
	if interval <= 0 {
		interval = time.Minute
	}
	r.startOnce.Do(func() {
		ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
		r.done = make(chan struct{})
		go func() {
			defer close(r.done)
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if sample != nil {
						sample(ctx)
					}
					_ = r.Flush()
				}
			}
		}()
	})
	return nil
}

// Stop ends the loop Start began and writes what is left. Idempotent.
func (r *Recorder) Stop() {
	if r == nil {
		return
	}
	r.stopOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
		_ = r.Flush()
	})
}
