package run_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Nothing but cmd/ imports the actor engine (engine/flow and what is under
// it, apart from its own packages): the API and the triggers hand runs to
// the engine through this package (docs/architecture.md). Test files are
// not counted.
func TestOnlyCmdImportsTheEngine(t *testing.T) {
	const module = "github.com/maestro-aws/maestro/"
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	engine := module + "engine/flow"
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	importers := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if !under(imp, engine) {
				continue
			}
			importers++
			if !under(pkg, module+"cmd") && !under(pkg, engine) {
				t.Errorf("%s imports %s; only cmd/ may", strings.TrimPrefix(pkg, module), strings.TrimPrefix(imp, module))
			}
		}
	}
	if importers == 0 {
		t.Fatal("no package imports engine/flow; the check would pass vacuously")
	}
}
