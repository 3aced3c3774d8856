package migrations_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// contracting matches statements that break the release before a migration:
// its code still reads or writes what they drop, rename or retype.
// Schema changes are expand-then-contract (docs/deploy.md, "Database:
// migrations, roles, TLS"): release N+1 adds, release N+2 at the earliest
// removes what N+1 stopped using.
var contracting = regexp.MustCompile(`(?is)\bDROP\s+(COLUMN|TABLE)\b|\bRENAME\b|\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`)

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

// TestMigrationsOnlyExpand refuses a migration that drops, renames or
// retypes a table or column unless contractAllowed names it with a reason.
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
		found := contracting.FindAllString(upSection(string(raw)), -1)
		if len(found) > 0 && contractAllowed[f] == "" {
			t.Errorf("%s contracts the schema (%q): the release before it would break on the migrated schema; "+
				"add the new shape now and remove the old one a release later, or list the file in contractAllowed with the reason it is safe", f, found)
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
		"DROP TABLE step_paused;":                                       true,
		"ALTER TABLE workflow RENAME TO wf;":                            true,
		"ALTER TABLE workflow RENAME COLUMN owner TO o;":                true,
		"ALTER TABLE t ALTER COLUMN c TYPE bigint;":                     true,
		"ALTER TABLE t ALTER COLUMN c SET DATA TYPE bigint;":            true,
		"ALTER TABLE t ADD COLUMN c int;":                               false,
		"DROP INDEX workflow_instance_parent_idx;":                      false,
		"ALTER TABLE step_instance DROP CONSTRAINT step_instance_fkey;": false,
		"ALTER TABLE t ALTER COLUMN c SET DEFAULT 0;":                   false,
	} {
		if got := contracting.MatchString(upSection(sql)); got != want {
			t.Errorf("%q: contracting = %v, want %v", sql, got, want)
		}
	}
	if got := upSection("-- DROP TABLE in a comment\nSELECT 1;\n-- +goose Down\nDROP TABLE x;"); contracting.MatchString(got) {
		t.Errorf("comments or the Down part counted: %q", got)
	}
}
