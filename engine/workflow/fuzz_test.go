package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The definition decoders take untrusted bytes straight from the API. For
// any input they must return a definition or a *ValidationError, never
// panic, hang or blow up; what they accept must survive validation and a
// round trip through its JSON. Seeds: the files in testdata and
// testdata/hostile (the alias bomb), the committed corpus in testdata/fuzz,
// and the shapes below. `make fuzz` runs
// both targets.

// fuzzValidator validates what the fuzzers decode, as the API does (SEL
// left out: the SEL package has fuzzers of its own).
var fuzzValidator = Validator{}

func addDefinitionSeeds(f *testing.F, ext string) {
	files, err := filepath.Glob(filepath.Join("testdata", "*."+ext))
	if err != nil {
		f.Fatal(err)
	}
	hostile, _ := filepath.Glob(filepath.Join("testdata", "hostile", "*."+ext))
	files = append(files, hostile...)
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// checkDecoded holds for every decoder result.
func checkDecoded(t *testing.T, data []byte, d *Definition, err error) {
	t.Helper()
	if err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) == 0 {
			t.Fatalf("%q: error %T %v is not a ValidationError with problems", data, err, err)
		}
		return
	}
	if d == nil {
		t.Fatalf("%q: no definition and no error", data)
	}
	if err := fuzzValidator.Validate(d); err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%q: validation error %T %v", data, err, err)
		}
	}
	canonical, err := d.Canonical()
	if err != nil {
		t.Fatalf("%q: canonical: %v", data, err)
	}
	encoded, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("%q: encode: %v", data, err)
	}
	again, err := DecodeJSON(encoded)
	if err != nil {
		t.Fatalf("%q: its own JSON %s does not decode: %v", data, encoded, err)
	}
	if c2, err := again.Canonical(); err != nil || !bytes.Equal(c2, canonical) {
		t.Fatalf("%q: round trip changed the definition:\n%s\n%s", data, canonical, c2)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	addDefinitionSeeds(f, "json")
	for _, s := range []string{
		`{"workflow":{"id":"a","steps":[{"step":{"id":"s","type":"NoOp"}}]}}`,
		`{"workflow":{"id":"a","params":{"p":{"type":"MAP","value":{"q":{"type":"LONG","value":1}}}},"steps":[]}}`,
		`{"workflow":` + strings.Repeat(`{"a":`, 300) + `1` + strings.Repeat(`}`, 300) + `}`,
		`{"workflow":{"id":"a\u0000","steps":[{"step":{"id":"\ud800","type":"NoOp"}}]}}`,
		`{"workflow":{"id":"a","steps":[{"foreach":{"id":"f","steps":[{"while":{"id":"w","condition":"true","steps":[]}}]}}]}}`,
		`{"properties":{"owner":{"name":"x","extra":[1,2]}},"is_active":false,"workflow":{"id":"a","steps":[]}}`,
		`[1, 2, 3]`, `null`, `"workflow"`, `{"workflow": 1e999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := DecodeJSON(data)
		checkDecoded(t, data, d, err)
	})
}

func FuzzDecodeYAML(f *testing.F) {
	addDefinitionSeeds(f, "yaml")
	for _, s := range []string{
		"Workflow:\n  id: a\n  jobs:\n    - job: {id: s, type: NoOp}\n",
		"Workflow:\n  id: a\n  base: &b {type: NoOp}\n  jobs:\n    - job: {<<: *b, id: s}\n",
		"Workflow:\n  id: a\n  '!n<long>': 1 + 1\n  jobs:\n    - job:\n        id: s\n        type: NoOp\n        transition: 'IF n > 1 THEN t'\n    - job: {id: t, type: NoOp}\n",
		"a: &a [1, 2]\nb: &b [*a, *a]\nc: [*b, *b, *b]\n",
		"Workflow: " + strings.Repeat("[", 300) + strings.Repeat("]", 300) + "\n",
		"---\nWorkflow: {id: a}\n---\nWorkflow: {id: b}\n",
		"Workflow:\n  id: !!binary aGVsbG8=\n", "Workflow: 0x7fffffffffffffffff\n", "? [a]\n: b\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := DecodeYAML(data)
		checkDecoded(t, data, d, err)
	})
}
