package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNotEMF is returned by Parse for a line that is not an EMF document
// (another log line).
var ErrNotEMF = errors.New("not an embedded metric format document")

// Datum is one metric of an EMF document, as CloudWatch Logs extracts it.
type Datum struct {
	Namespace string
	Name      string
	Unit      Unit
	// Dimensions are the dimension names of one of the directive's
	// dimension sets with their values from the document.
	Dimensions map[string]string
	// Values (and Counts, when the document gives them) are the
	// observations.
	Values []float64
	Counts []float64
}

// Parse reads one log line as CloudWatch Logs reads an EMF document: one
// Datum per metric and dimension set of each directive. It lets tests and
// tools check what a process really wrote (names, dimensions, units)
// against what alarms and dashboards read. A line that is not EMF yields
// ErrNotEMF; a malformed EMF document, another error.
func Parse(line []byte) ([]Datum, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(line, &doc); err != nil {
		return nil, ErrNotEMF
	}
	rawMeta, ok := doc["_aws"]
	if !ok {
		return nil, ErrNotEMF
	}
	var meta struct {
		Timestamp         *int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []metricDef
		}
	}
	if err := json.Unmarshal(rawMeta, &meta); err != nil {
		return nil, fmt.Errorf("emf _aws: %w", err)
	}
	if meta.Timestamp == nil {
		return nil, errors.New("emf _aws: no Timestamp")
	}
	var out []Datum
	for _, dir := range meta.CloudWatchMetrics {
		if dir.Namespace == "" {
			return nil, errors.New("emf directive without a Namespace")
		}
		sets := dir.Dimensions
		if len(sets) == 0 {
			sets = [][]string{nil}
		}
		for _, m := range dir.Metrics {
			values, counts, err := parseValue(doc[m.Name])
			if err != nil {
				return nil, fmt.Errorf("emf metric %s: %w", m.Name, err)
			}
			for _, set := range sets {
				dims := make(map[string]string, len(set))
				for _, name := range set {
					var v string
					if err := json.Unmarshal(doc[name], &v); err != nil {
						return nil, fmt.Errorf("emf dimension %s: want a string member: %w", name, err)
					}
					dims[name] = v
				}
				out = append(out, Datum{Namespace: dir.Namespace, Name: m.Name, Unit: m.Unit, Dimensions: dims,
					Values: values, Counts: counts})
			}
		}
	}
	return out, nil
}

// parseValue reads a metric member: a number, an array of numbers, or
// {"Values": [...], "Counts": [...]}.
func parseValue(raw json.RawMessage) ([]float64, []float64, error) {
	if raw == nil {
		return nil, nil, errors.New("declared but missing from the document")
	}
	var one float64
	if err := json.Unmarshal(raw, &one); err == nil {
		return []float64{one}, nil, nil
	}
	var many []float64
	if err := json.Unmarshal(raw, &many); err == nil {
		return many, nil, nil
	}
	var d distribution
	if err := json.Unmarshal(raw, &d); err != nil || len(d.Values) == 0 {
		return nil, nil, fmt.Errorf("value %s: want a number, numbers or {Values, Counts}", raw)
	}
	if len(d.Counts) != 0 && len(d.Counts) != len(d.Values) {
		return nil, nil, fmt.Errorf("%d values but %d counts", len(d.Values), len(d.Counts))
	}
	return d.Values, d.Counts, nil
}
