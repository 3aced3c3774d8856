package event_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/event"
	"github.com/maestro-aws/maestro/engine/flow"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// additions are the fields our events add to Maestro's.
var additions = []string{"event_id", "seq"}

// field is one member of a JSON object: its name and the kind of its
// value, with the fields of an object (or of an array's first object).
type field struct {
	name, kind string
	fields     []field
}

// shape reads the fields of a JSON object in order.
func shape(t *testing.T, b []byte) []field {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var walk func() (string, []field)
	walk = func() (string, []field) {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				var fs []field
				for dec.More() {
					k, _ := dec.Token()
					kind, sub := walk()
					fs = append(fs, field{name: k.(string), kind: kind, fields: sub})
				}
				_, _ = dec.Token()
				return "object", fs
			case '[':
				var first []field
				kind := "array"
				for i := 0; dec.More(); i++ {
					k, sub := walk()
					if i == 0 {
						kind, first = "array of "+k, sub
					}
				}
				_, _ = dec.Token()
				return kind, first
			}
		case json.Number:
			if _, err := v.Int64(); err == nil {
				return "integer", nil
			}
			return "number", nil
		case string:
			return "string", nil
		case bool:
			return "boolean", nil
		}
		return "null", nil
	}
	kind, fs := walk()
	if kind != "object" {
		t.Fatalf("%s is not an object", b)
	}
	return fs
}

func compareShapes(path string, got, want []field) []string {
	var problems []string
	var names []string
	for _, g := range got {
		if !slices.Contains(additions, g.name) || path != "" {
			names = append(names, g.name)
		}
	}
	var wantNames []string
	for _, w := range want {
		wantNames = append(wantNames, w.name)
	}
	if !slices.Equal(names, wantNames) {
		problems = append(problems, fmt.Sprintf("%sfields %v, Maestro's %v", path, names, wantNames))
	}
	for _, w := range want {
		i := slices.IndexFunc(got, func(g field) bool { return g.name == w.name })
		if i < 0 {
			continue
		}
		g := got[i]
		if g.kind != w.kind {
			problems = append(problems, fmt.Sprintf("%s%s is %s, Maestro's %s", path, w.name, g.kind, w.kind))
			continue
		}
		if len(w.fields) > 0 {
			problems = append(problems, compareShapes(path+w.name+".", g.fields, w.fields)...)
		}
	}
	return problems
}

// Every event type's JSON, as a consumer receives it from events the
// product wrote, has the fields of Maestro's event of that type
// (models/events, fixtures/events), in Maestro's order and with the same
// kinds of values, plus only our additions (event_id, seq). The fixtures in
// testdata/contract are our own, written after Maestro's shapes.
func TestEventContract(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Engine(nil, flow.Config{})
	c := e.forward("contract")
	ctx := context.Background()
	actor := definition.Actor{Name: "dana"}
	d, err := workflow.DecodeJSON([]byte(`{"properties":{"owner":"dana"},"workflow":{"id":"orders-daily","name":"Daily orders",
		"tags":[{"name":"finance","namespace":"system"},"daily"],
		"steps":[{"step":{"id":"extract","type":"NoOp","transition":{"successors":{"load":"true"}}}},{"step":{"id":"load","type":"NoOp"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Defs.CreateAs(ctx, d, actor); err != nil {
		t.Fatal(err)
	}
	d.Properties = nil
	d.Workflow.Description = "version two"
	if _, err := e.Defs.CreateAs(ctx, d, actor); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Defs.UpdateProperties(ctx, "orders-daily", workflow.PropertiesChange{Set: &workflow.Properties{Description: ptr("all orders")}}, actor); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Defs.Activate(ctx, "orders-daily", "1", actor); err != nil {
		t.Fatal(err)
	}
	e.Wait(e.Start("orders-daily"), time.Minute)
	if _, err := e.Defs.Deactivate(ctx, "orders-daily", actor); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Defs.Delete(ctx, "orders-daily", actor); err != nil {
		t.Fatal(err)
	}
	e.drained(c)
	evs, types := c.snapshot()
	rendered := map[event.Type][]byte{}
	for i, ev := range evs {
		if _, done := rendered[types[i]]; done {
			continue
		}
		b, _, err := event.Render(event.Wire(ev), "", "prod-east", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rendered[types[i]] = b
	}
	for _, ty := range event.Types() {
		if ty == event.Alert || ty == event.BackfillStatusChange {
			continue // ours; docs/events.md and docs/backfill.md describe them
		}
		t.Run(string(ty), func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", "contract", string(ty)+".json"))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := rendered[ty]
			if !ok {
				t.Fatalf("no %s event was written", ty)
			}
			for _, p := range compareShapes("", shape(t, got), shape(t, want)) {
				t.Error(p)
			}
			var m map[string]any
			_ = json.Unmarshal(got, &m)
			if m["type"] != string(ty) || m["cluster_name"] != "prod-east" || m["event_id"] == "" {
				t.Errorf("type %v, cluster_name %v, event_id %v", m["type"], m["cluster_name"], m["event_id"])
			}
		})
	}
}
