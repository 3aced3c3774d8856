package migrations_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// contracting matches statements that may break the release before a
// migration: its code may still read or write what they drop, rename or
// retype. Schema changes are expand-then-contract (docs/deploy.md, "Expand,
// then contract"): release N+1 adds, release N+2 at the earliest removes
// what N+1 stopped using.
var contracting = regexp.MustCompile(`(?is)\bDROP\s+(COLUMN|TABLE|VIEW|MATERIALIZED\s+VIEW|SEQUENCE|TYPE|FUNCTION|SCHEMA)\b|\bRENAME\b|\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b|\bALTER\s+TABLE\s+(IF\s+EXISTS\s+)?(ONLY\s+)?\S+\s+DROP\s+(IF\s+EXISTS\s+)?("?\w+"?)\s*(,|;|$|CASCADE|RESTRICT)`)

// contractAllowed are the contracting statements accepted, by file, each
// with the reason the release before it keeps working.
var contractAllowed = map[string]string{
	"00010_ids_collate_c.sql": "ALTER COLUMN TYPE text COLLATE \"C\": the type stays text, only the collation changes; older code reads and writes the columns unchanged",
}

// upSection is a migration's Up part without its comments: its Down part
// contracts by nature and never runs in a deployment.
func upSection(sql string) string {
	up, _, _ := strings.Cut(sql, "-- +goose Down")
	var b strings.Builder
	for line := range strings.Lines(up) {
		if code, _, _ := strings.Cut(line, "--"); strings.TrimSpace(code) != "" {
			b.WriteString(code)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

var (
	dropObject  = regexp.MustCompile(`(?is)^DROP\s+(?:TABLE|VIEW|MATERIALIZED\s+VIEW|SEQUENCE|TYPE|FUNCTION|SCHEMA)\s+(?:IF\s+EXISTS\s+)?(.+?)(?:\s+CASCADE|\s+RESTRICT)?\s*$`)
	alterTable  = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(\S+)\s+(.*)$`)
	renameTable = regexp.MustCompile(`(?is)^RENAME\s+TO\b`)
	dropColumn  = regexp.MustCompile(`(?is)^DROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?("?\w+"?)`)
	renameCol   = regexp.MustCompile(`(?is)^RENAME\s+(?:COLUMN\s+)?("?\w+"?)\s+TO\b`)
	retypeCol   = regexp.MustCompile(`(?is)^ALTER\s+(?:COLUMN\s+)?("?\w+"?)\s+(?:SET\s+DATA\s+)?TYPE\b`)
	notColumn   = regexp.MustCompile(`(?is)^DROP\s+(CONSTRAINT|DEFAULT|NOT\s+NULL|EXPRESSION|IDENTITY)\b`)
)

// contractedNames are the tables, columns and other objects that the
// contracting statements of up (an Up section) drop, rename or retype:
// what the release before the migration must no longer read.
func contractedNames(up string) []string {
	var names []string
	add := func(n string) {
		n = strings.Trim(strings.TrimSpace(n), `"`)
		if i := strings.LastIndexByte(n, '.'); i >= 0 {
			n = strings.Trim(n[i+1:], `"`)
		}
		if i := strings.IndexByte(n, '('); i >= 0 { // a function's signature
			n = n[:i]
		}
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for stmt := range strings.SplitSeq(up, ";") {
		stmt = strings.Join(strings.Fields(stmt), " ")
		if m := dropObject.FindStringSubmatch(stmt); m != nil {
			for n := range strings.SplitSeq(m[1], ",") {
				add(n)
			}
			continue
		}
		m := alterTable.FindStringSubmatch(stmt)
		if m == nil {
			continue
		}
		table := m[1]
		for action := range strings.SplitSeq(m[2], ",") {
			action = strings.TrimSpace(action)
			switch {
			case renameTable.MatchString(action):
				add(table)
			case notColumn.MatchString(action):
			case dropColumn.MatchString(action):
				add(dropColumn.FindStringSubmatch(action)[1])
			case renameCol.MatchString(action):
				add(renameCol.FindStringSubmatch(action)[1])
			case retypeCol.MatchString(action):
				add(retypeCol.FindStringSubmatch(action)[1])
			}
		}
	}
	return names
}

// releaseBefore is the release a migration file is rolled out beside: the
// first parent of the commit that brought the file to this branch (a merge
// counts as bringing it), or HEAD when the file is not committed yet. ok is
// false without a full git history (no git, not a checkout, a shallow
// clone): the caller then refuses every contraction not in contractAllowed.
func releaseBefore(t *testing.T, file string) (ref string, ok bool) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		return "", false
	}
	out, err := exec.Command("git", "rev-parse", "--is-shallow-repository").Output()
	if err != nil || strings.TrimSpace(string(out)) == "true" {
		return "", false
	}
	added, err := exec.Command("git", "log", "-1", "--format=%H", "-m", "--first-parent", "--diff-filter=A", "--", file).Output()
	if err != nil {
		return "", false
	}
	if h := strings.TrimSpace(string(added)); h != "" {
		return h + "^1", true
	}
	return "HEAD", true
}

// readBy lists where the Go code of ref (tests and migrations/ left out)
// names name as a whole word: places the release at ref reads or writes it.
func readBy(t *testing.T, ref, name string) []string {
	t.Helper()
	cmd := exec.Command("git", "grep", "-I", "-n", "-w", "-F", "-e", name, ref, "--", "*.go", ":(exclude)*_test.go", ":(exclude)migrations/")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return nil // no match
		}
		t.Fatalf("git grep %s in %s: %v", name, ref, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 3 {
		lines = append(lines[:3], "…")
	}
	return lines
}

// stillRead says, for an Up section, what it contracts that the release at
// ref still reads (one message each), or that it cannot tell what it
// contracts.
func stillRead(t *testing.T, up, ref string) []string {
	t.Helper()
	names := contractedNames(up)
	if len(names) == 0 {
		return []string{fmt.Sprintf("contracts the schema (%q) but the check cannot tell what it removes", contracting.FindAllString(up, -1))}
	}
	var msgs []string
	for _, name := range names {
		if where := readBy(t, ref, name); len(where) > 0 {
			msgs = append(msgs, fmt.Sprintf("drops, renames or retypes %q, which the release before it (%s) still reads: %s",
				name, ref, strings.Join(where, "; ")))
		}
	}
	return msgs
}

// TestMigrationsOnlyExpand refuses a migration that drops, renames or
// retypes a table, column or other object that the release before it still
// names in its Go code (that release runs beside the migrated schema during
// the rollout), unless contractAllowed names the file with a reason. A
// contraction of something the previous release no longer uses passes:
// that is the contract half of expand-then-contract. Without a full git
// history every contraction not in contractAllowed is refused.
func TestMigrationsOnlyExpand(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		up := upSection(string(raw))
		found := contracting.FindAllString(up, -1)
		if len(found) == 0 || contractAllowed[f] != "" {
			continue
		}
		ref, ok := releaseBefore(t, f)
		if !ok {
			t.Errorf("%s contracts the schema (%q) and without git history nothing shows the release before it no longer reads what it removes; "+
				"list the file in contractAllowed with the reason it is safe", f, found)
			continue
		}
		for _, msg := range stillRead(t, up, ref) {
			t.Errorf("%s %s; add the new shape now and remove the old one a release after the code stopped using it "+
				"(expand, then contract), or list the file in contractAllowed with the reason it is safe", f, msg)
		}
	}
	for f := range contractAllowed {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("contractAllowed names %s, which is not a migration", f)
		}
	}
}

// The check itself: it sees what it must and not what it must not.
func TestContractingPattern(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]bool{
		"ALTER TABLE workflow DROP COLUMN owner;":                       true,
		"alter table x\n  drop   column y":                              true,
		"ALTER TABLE workflow DROP owner;":                              true,
		"DROP TABLE step_paused;":                                       true,
		"DROP VIEW run_summary;":                                        true,
		"DROP FUNCTION maestro_notify();":                               true,
		"ALTER TABLE workflow RENAME TO wf;":                            true,
		"ALTER TABLE workflow RENAME COLUMN owner TO o;":                true,
		"ALTER TABLE t ALTER COLUMN c TYPE bigint;":                     true,
		"ALTER TABLE t ALTER COLUMN c SET DATA TYPE bigint;":            true,
		"ALTER TABLE t ADD COLUMN c int;":                               false,
		"DROP INDEX workflow_instance_parent_idx;":                      false,
		"ALTER TABLE step_instance DROP CONSTRAINT step_instance_fkey;": false,
		"ALTER TABLE t ALTER COLUMN c SET DEFAULT 0;":                   false,
		"ALTER TABLE t ALTER COLUMN c DROP DEFAULT;":                    false,
	} {
		if got := contracting.MatchString(upSection(sql)); got != want {
			t.Errorf("%q: contracting = %v, want %v", sql, got, want)
		}
	}
	if got := upSection("-- DROP TABLE in a comment\nSELECT 1;\n-- +goose Down\nDROP TABLE x;"); contracting.MatchString(got) {
		t.Errorf("comments or the Down part counted: %q", got)
	}
}

// The names a contraction removes are what the previous release is
// searched for.
func TestContractedNames(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string][]string{
		"ALTER TABLE workflow DROP COLUMN owner;":                          {"owner"},
		"ALTER TABLE public.workflow DROP IF EXISTS \"owner\", DROP x;":    {"owner", "x"},
		"ALTER TABLE workflow RENAME TO wf;":                               {"workflow"},
		"ALTER TABLE workflow RENAME COLUMN owner TO o;":                   {"owner"},
		"ALTER TABLE t ALTER COLUMN c SET DATA TYPE bigint;":               {"c"},
		"DROP TABLE IF EXISTS step_paused, public.signal_x CASCADE;":       {"step_paused", "signal_x"},
		"DROP FUNCTION maestro_notify();":                                  {"maestro_notify"},
		"ALTER TABLE t DROP CONSTRAINT k; ALTER TABLE t ADD COLUMN c int;": nil,
	} {
		if got := contractedNames(upSection(sql)); !slices.Equal(got, want) {
			t.Errorf("%q: names %q, want %q", sql, got, want)
		}
	}
}

// A contraction of a column the release before still reads is refused,
// one of a name that release never used passes: the git side of the check,
// with HEAD as the release before.
func TestContractionAgainstThePreviousRelease(t *testing.T) {
	t.Parallel()
	if _, ok := releaseBefore(t, "00001_workflow.sql"); !ok {
		t.Skip("no full git history (shallow clone): TestMigrationsOnlyExpand refuses every contraction instead")
	}
	refused := upSection("ALTER TABLE workflow_instance DROP COLUMN trace_context;")
	if msgs := stillRead(t, refused, "HEAD"); len(msgs) != 1 || !strings.Contains(msgs[0], `"trace_context"`) {
		t.Errorf("dropping a column HEAD reads: %q, want it refused", msgs)
	}
	renamed := upSection("ALTER TABLE workflow_instance RENAME TO run;")
	if msgs := stillRead(t, renamed, "HEAD"); len(msgs) != 1 {
		t.Errorf("renaming a table HEAD reads: %q, want it refused", msgs)
	}
	passes := upSection("ALTER TABLE workflow_instance DROP COLUMN maestro_column_nobody_ever_named; DROP TABLE IF EXISTS maestro_table_nobody_ever_named;")
	if msgs := stillRead(t, passes, "HEAD"); len(msgs) != 0 {
		t.Errorf("dropping what HEAD never named: %q, want it accepted", msgs)
	}
}
