// Package engine_test holds the module's layering: every package has a
// layer, and a package imports only packages of its own layer or below
// (docs/architecture.md, "Layers"). Test files are not counted: a test may
// run what sits above the code it tests.
package engine_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/maestro-aws/maestro/"

// The layers, lowest first, as docs/architecture.md lists them.
const (
	base    = iota // no Maestro concept: processes, connections, metrics, test databases
	model          // definitions, runs, steps, params, wire shapes, fire times
	handoff        // a run's identity and creation; the work and event outboxes
	store          // one concept's tables each; the run service over them
	engine         // membership, actors, the writer
	upper          // step runtimes, triggers, event delivery and alerting
	surface        // REST API, client, command line
	wiring         // cmd/, functions/, infra: main packages and their builders
)

var layerNames = []string{"base", "model", "run hand-off", "stores", "engine", "runtimes/triggers/events", "surfaces", "wiring"}

// layers places every package of the module. A new package fails
// TestLayers until it is placed here (and given its line in
// docs/architecture.md).
var layers = map[string]int{
	"engine":                                        base, // this test, no code
	"sel":                                           base,
	"migrations":                                    base,
	"engine/startstop":                              base,
	"engine/metrics":                                base,
	"engine/health":                                 base,
	"engine/groupcount":                             base,
	"engine/authz":                                  base,
	"engine/dbconn":                                 base,
	"engine/awsconf":                                base,
	"engine/tracing":                                base,
	"engine/dbconn/rdsca":                           base,
	"engine/pgparam":                                base,
	"engine/localpg":                                base,
	"engine/dbtest":                                 base,
	"engine/ops/redrive":                            base,
	"engine/webui":                                  base,
	"engine/workflow":                               model,
	"engine/instance":                               model,
	"engine/params":                                 model,
	"engine/flatten":                                model,
	"engine/wire":                                   model,
	"engine/stepruntime":                            model,
	"engine/trigger/schedule":                       model,
	"engine/tablechange":                            model,
	"engine/run":                                    handoff,
	"engine/queue":                                  handoff,
	"engine/event":                                  handoff,
	"engine/event/eventtest":                        handoff,
	"engine/definition":                             store,
	"engine/execution":                              store,
	"engine/jobtemplate":                            store,
	"engine/tagpermit":                              store,
	"engine/breakpoint":                             store,
	"engine/trigger":                                store,
	"engine/trigger/signal":                         store,
	"engine/stepruntime/completion":                 store,
	"engine/ops":                                    store,
	"engine/backfill":                               store,
	"engine/incremental":                            store,
	"engine/membership":                             engine,
	"engine/flow":                                   engine,
	"engine/flow/internal/flowstore":                engine,
	"engine/flow/internal/composite":                engine,
	"engine/flow/flowtest":                          engine,
	"engine/stepruntime/external":                   upper,
	"engine/stepruntime/httpstep":                   upper,
	"engine/stepruntime/lambdastep":                 upper,
	"engine/stepruntime/ecstask":                    upper,
	"engine/stepruntime/ecstask/ecstasktest":        upper,
	"engine/stepruntime/registry":                   upper,
	"engine/trigger/scheduler":                      upper,
	"engine/trigger/signalmsg":                      upper,
	"engine/trigger/signalbroker":                   upper,
	"engine/trigger/backfill":                       upper,
	"engine/event/sqssink":                          upper,
	"engine/alert":                                  upper,
	"engine/eventsvc":                               upper,
	"engine/api":                                    surface,
	"engine/client":                                 surface,
	"engine/cli":                                    surface,
	"cmd/maestro":                                   wiring,
	"infra":                                         wiring,
	"localstack":                                    wiring,
	"localstack/e2e":                                wiring,
	"localstack/iamcheck":                           wiring,
	"functions":                                     wiring,
	"functions/api":                                 wiring,
	"functions/api/internal/apienv":                 wiring,
	"functions/internal/apigateway":                 wiring,
	"functions/internal/coldstart":                  wiring,
	"functions/internal/migrate":                    wiring,
	"functions/internal/publisher":                  wiring,
	"functions/internal/signals":                    wiring,
	"functions/migrate":                             wiring,
	"functions/publisher":                           wiring,
	"functions/signals":                             wiring,
	"functions/signals/internal/signalsenv":         wiring,
	"functions/timetrigger":                         wiring,
	"engine/archive":                                base,
	"engine/retention":                              store,
	"functions/archiver":                            wiring,
	"functions/archiver/internal/archiverenv":       wiring,
	"functions/internal/archiver":                   wiring,
	"functions/timetrigger/internal/timetriggerenv": wiring,

	// AWS job steps: the shared machinery and Athena, Glue, StepFunctions.
	"engine/stepruntime/awsjob":        upper,
	"engine/stepruntime/athena":        upper,
	"engine/stepruntime/glue":          upper,
	"engine/stepruntime/stepfunctions": upper,
	// [aws-steps] part B: Batch, Emr, Notebook.
	"engine/stepruntime/jobparam":        upper,
	"engine/stepruntime/batch":           upper,
	"engine/stepruntime/batch/batchtest": upper,
	"engine/stepruntime/emr":             upper,
	"engine/stepruntime/emr/emrtest":     upper,
	"engine/stepruntime/notebook":        upper,

	"engine/iceberg": upper,
}

func TestLayers(t *testing.T) {
	graph := moduleGraph(t)
	if len(graph) < 40 {
		t.Fatalf("go list found %d packages; the check would pass vacuously", len(graph))
	}
	for _, p := range check(layers, graph) {
		t.Error(p)
	}
	// A placed package that no longer exists keeps the table (and the
	// docs that copy it) from telling the truth.
	for pkg := range layers {
		if _, ok := graph[pkg]; !ok {
			t.Errorf("%s is placed in layers but is not a package any more; remove it (and its line in docs/architecture.md)", pkg)
		}
	}
}

// Nothing but cmd/ imports the actor engine (engine/flow and what is under
// it, apart from its own packages): the API and the triggers hand runs to
// the engine through engine/run (docs/architecture.md). The layer table
// alone would allow a surface to import the engine layer; this does not.
func TestOnlyCmdImportsTheEngine(t *testing.T) {
	const engine = "engine/flow"
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	importers := 0
	for pkg, imports := range moduleGraph(t) {
		for _, imp := range imports {
			if !under(imp, engine) {
				continue
			}
			importers++
			if !under(pkg, "cmd") && !under(pkg, engine) {
				t.Errorf("%s imports %s; only cmd/ may", pkg, imp)
			}
		}
	}
	if importers == 0 {
		t.Fatal("no package imports engine/flow; the check would pass vacuously")
	}
}

// The check itself: an import up the table and an unplaced package are
// both reported; imports inside a layer and down it are not.
func TestCheckReportsUpwardImportsAndUnplacedPackages(t *testing.T) {
	l := map[string]int{"engine/workflow": model, "engine/run": handoff, "engine/api": surface}
	graph := map[string][]string{
		"engine/workflow": {"engine/api"},                    // up: reported
		"engine/run":      {"engine/workflow", "engine/run"}, // down, same: fine
		"engine/api":      {"engine/run", "engine/new"},
		"engine/new":      nil, // not placed: reported
	}
	got := check(l, graph)
	want := []string{
		"engine/new has no layer: place it in engine/layers_test.go and docs/architecture.md",
		"engine/workflow (model) imports engine/api (surfaces), which is above it",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("check reported\n%q\nwant\n%q", got, want)
	}
}

// check returns the layering problems of graph (package -> its imports,
// both module-relative), sorted.
func check(l map[string]int, graph map[string][]string) []string {
	var problems []string
	for pkg, imports := range graph {
		from, ok := l[pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no layer: place it in engine/layers_test.go and docs/architecture.md", pkg))
			continue
		}
		for _, imp := range imports {
			to, ok := l[imp]
			if ok && to > from {
				problems = append(problems, fmt.Sprintf("%s (%s) imports %s (%s), which is above it",
					pkg, layerNames[from], imp, layerNames[to]))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// moduleGraph lists the module's packages with their module-internal
// imports (not their tests'), both without the module prefix.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list the module's imports: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		var imports []string
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				imports = append(imports, rel)
			}
		}
		graph[pkg] = imports
	}
	return graph
}
