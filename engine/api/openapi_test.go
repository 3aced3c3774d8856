package api

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/webui"
)

// routePattern matches the Go 1.22 method patterns the package registers.
var routePattern = regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) (/\S*)$`)

// sourceRoutes returns every route pattern written in the package's
// non-test source files: the literals passed to s.handle and those in route
// tables alike.
func sourceRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && routePattern.MatchString(s) {
				out = append(out, s)
			}
			return true
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// offlineServer builds the handler on a pool that never connects: routing
// needs no database.
func offlineServer(t *testing.T) *Server {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	defs := definition.NewStore(pool)
	s, err := New(Config{DB: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Definitions: defs,
		Runs: execution.New(pool, defs, 0), UI: webui.Files{}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var wildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\.{0,3}\}`)

// concrete fills a pattern's wildcards with sample values.
func concrete(path string) string {
	return wildcard.ReplaceAllStringFunc(path, func(w string) string {
		return "x" + strings.Trim(w, "{}.") + "1"
	})
}

// matched returns the mux pattern that serves method and path.
func (s *Server) matched(method, path string) string {
	_, pattern := s.mux.Handler(httptest.NewRequest(method, concrete(path), nil))
	return pattern
}

type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas    map[string]json.RawMessage `json:"schemas"`
		Parameters map[string]struct {
			Name string `json:"name"`
			In   string `json:"in"`
		} `json:"parameters"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

type openAPIOperation struct {
	OperationID string `json:"operationId"`
	Parameters  []struct {
		Ref  string `json:"$ref"`
		Name string `json:"name"`
		In   string `json:"in"`
	} `json:"parameters"`
	Responses map[string]json.RawMessage `json:"responses"`
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json is not OpenAPI 3: %q", doc.OpenAPI)
	}
	return &doc
}

// TestOpenAPIDescribesEveryRoute keeps openapi.json true: every route the
// package registers is documented with its path parameters, and every
// documented operation is served by the route of the same pattern.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	s := offlineServer(t)
	doc := loadOpenAPI(t)
	routes := sourceRoutes(t)
	for _, rt := range s.workflowRouteTable() {
		if !slices.Contains(routes, rt.pattern) {
			t.Fatalf("route table entry %q was not found in the source", rt.pattern)
		}
	}
	// The lead's routes must be among them too.
	for _, want := range []string{"GET /api/v3/health", "POST /api/v3/workflows/{id}/versions/{version}/actions/start",
		"PUT /api/v3/workflows/{id}/actions/kill"} {
		if !slices.Contains(routes, want) {
			t.Errorf("expected route %q in the source", want)
		}
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	for _, pattern := range routes {
		m := routePattern.FindStringSubmatch(pattern)
		method, path := m[1], m[2]
		// The pattern is live on the mux, not just written down.
		if got := s.matched(method, path); got != pattern {
			t.Errorf("%s: the mux serves %s %s with %q", pattern, method, concrete(path), got)
		}
		if !documented[pattern] {
			t.Errorf("%s is not in openapi.json", pattern)
			continue
		}
		var op openAPIOperation
		if err := json.Unmarshal(doc.Paths[path][strings.ToLower(method)], &op); err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		var declared []string
		for _, p := range op.Parameters {
			name, in := p.Name, p.In
			if p.Ref != "" {
				c, ok := doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				if !ok {
					t.Errorf("%s: unknown parameter %s", pattern, p.Ref)
					continue
				}
				name, in = c.Name, c.In
			}
			if in == "path" {
				declared = append(declared, name)
			}
		}
		var wildcards []string
		for _, w := range wildcard.FindAllStringSubmatch(path, -1) {
			wildcards = append(wildcards, w[1])
		}
		slices.Sort(declared)
		slices.Sort(wildcards)
		if !slices.Equal(declared, wildcards) {
			t.Errorf("%s: path parameters %v in openapi.json, %v in the pattern", pattern, declared, wildcards)
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(op.Responses)), func(code string) bool { return strings.HasPrefix(code, "2") }) {
			t.Errorf("%s: no success response documented", pattern)
		}
	}
	for pattern := range documented {
		if !slices.Contains(routes, pattern) {
			t.Errorf("openapi.json documents %s, which no route registers", pattern)
		}
	}
}

// TestOpenAPIReferencesResolve checks every $ref points at a component and
// operation ids are unique.
func TestOpenAPIReferencesResolve(t *testing.T) {
	doc := loadOpenAPI(t)
	var generic any
	if err := json.Unmarshal(openAPIDocument, &generic); err != nil {
		t.Fatal(err)
	}
	sections := map[string]map[string]json.RawMessage{
		"schemas": doc.Components.Schemas, "responses": doc.Components.Responses,
		"parameters": {},
	}
	for k := range doc.Components.Parameters {
		sections["parameters"][k] = nil
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
				if len(parts) != 2 {
					t.Errorf("unexpected $ref %q", ref)
				} else if _, ok := sections[parts[0]][parts[1]]; !ok {
					t.Errorf("dangling $ref %q", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(generic)
	ids := map[string]string{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
			if prev, dup := ids[op.OperationID]; dup {
				t.Errorf("operationId %s used by %s and %s %s", op.OperationID, prev, method, path)
			}
			ids[op.OperationID] = method + " " + path
		}
	}
}

// TestOpenAPIIsServedAsIs serves the embedded document unchanged.
func TestOpenAPIIsServedAsIs(t *testing.T) {
	rec := httptest.NewRecorder()
	offlineServer(t).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v3/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != string(openAPIDocument) {
		t.Fatalf("GET /api/v3/openapi.json = %d %s", rec.Code, rec.Header())
	}
}
