package workflow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every definition in examples/ decodes and passes validation with the
// step types this deployment runs.
func TestExamplesAreValid(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*"))
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			decode := DecodeJSON
			if strings.HasSuffix(f, ".yaml") {
				decode = DecodeYAML
			}
			d, err := decode(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := (Validator{CheckExpression: trivialCheck}).Validate(d); err != nil {
				t.Fatalf("validate: %v", err)
			}
		})
	}
}
