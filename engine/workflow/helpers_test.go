package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// want is an expected problem: the exact path and a fragment of the message.
type want struct {
	path string
	msg  string
}

// problemsOf extracts the problems of a *ValidationError, failing the test on other errors.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error is %T (%v), want *ValidationError", err, err)
	}
	if !errors.Is(err, ErrInvalidDefinition) {
		t.Fatalf("errors.Is(err, ErrInvalidDefinition) = false")
	}
	return ve.Problems
}

// assertProblems checks that err holds exactly the wanted problems, in any order.
func assertProblems(t *testing.T, err error, wants ...want) {
	t.Helper()
	got := problemsOf(t, err)
	if len(wants) == 0 {
		if len(got) != 0 {
			t.Fatalf("unexpected problems:\n%s", formatProblems(got))
		}
		return
	}
	used := make([]bool, len(got))
	for _, w := range wants {
		found := false
		for i, p := range got {
			if !used[i] && p.Path == w.path && strings.Contains(p.Message, w.msg) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem %s: ...%s...\ngot:\n%s", w.path, w.msg, formatProblems(got))
		}
	}
	for i, p := range got {
		if !used[i] {
			t.Errorf("unexpected problem %s", p)
		}
	}
}

func formatProblems(ps []Problem) string {
	var sb strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&sb, "  %s\n", p)
	}
	return sb.String()
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mustDecode decodes JSON or fails.
func mustDecode(t *testing.T, doc string) *Definition {
	t.Helper()
	d, err := DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatalf("DecodeJSON: %v", err)
	}
	return d
}

// generic decodes JSON into plain values with json.Number.
func generic(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

// enumKeys hold values that decoding canonicalises (case), compared case-insensitively.
var enumKeys = map[string]bool{
	"run_strategy": true, "rule": true, "type": true, "mode": true, "failure_mode": true,
	"criticality": true, "namespace": true,
}

// equivalentJSON compares two generic JSON values; enum values compare case-insensitively.
func equivalentJSON(a, b any, key string) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !equivalentJSON(v, y[k], k) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equivalentJSON(x[i], y[i], key) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		if enumKeys[key] {
			return ok && strings.EqualFold(x, y)
		}
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

// trivialCheck stands in for the SEL compiler: it rejects expressions containing "@@".
func trivialCheck(expr string) error {
	if strings.Contains(expr, "@@") {
		return errors.New("unexpected '@@'")
	}
	return nil
}
