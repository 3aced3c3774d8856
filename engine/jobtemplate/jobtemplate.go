// Package jobtemplate stores job templates, Maestro's JobTemplate: params
// (and tags) that a typed step whose sub_type is the template's job_type
// inherits, one template per job type and version tag ("default" unless a
// step or run names another), possibly inheriting from other templates.
package jobtemplate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/workflow"
)

// DefaultVersion is the version tag a template is read at when none is
// named, as in Maestro.
const DefaultVersion = "default"

// Errors of the store, wrapped with what was being done.
var (
	// ErrNotFound reports a template that does not exist.
	ErrNotFound = errors.New("job template not found")
	// ErrInvalid reports a template that cannot be stored.
	ErrInvalid = errors.New("invalid job template")
)

// Template is a job template as Maestro's JobTemplate: its metadata and
// its definition.
type Template struct {
	Metadata   Metadata   `json:"metadata"`
	Definition Definition `json:"definition"`
}

// Metadata says who owns and supports the template. Extra holds the
// request's other fields, written inline as Maestro's extra info.
type Metadata struct {
	Owner         json.RawMessage            `json:"owner"`
	VersionAuthor string                     `json:"version_author"`
	Status        string                     `json:"status"`
	Support       string                     `json:"support"`
	TestWorkflows []string                   `json:"test_workflows,omitempty"`
	GitInfo       *workflow.GitInfo          `json:"git_info,omitempty"`
	CreateTime    int64                      `json:"create_time"`
	Extra         map[string]json.RawMessage `json:"-"`
}

// metadataFields are Metadata's own fields, which Extra may not hold.
var metadataFields = []string{"owner", "version_author", "status", "support", "test_workflows", "git_info", "create_time"}

// MarshalJSON writes the named fields, then the extra ones.
func (m Metadata) MarshalJSON() ([]byte, error) {
	type plain Metadata
	out, err := json.Marshal(plain(m))
	if err != nil || len(m.Extra) == 0 {
		return out, err
	}
	var b strings.Builder
	b.Write(out[:len(out)-1])
	for _, k := range slices.Sorted(maps.Keys(m.Extra)) {
		name, _ := json.Marshal(k)
		b.WriteByte(',')
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.Extra[k])
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// Definition is what a template gives the steps of its job type.
type Definition struct {
	JobType     string        `json:"job_type"`
	StepType    string        `json:"step_type"`
	Version     string        `json:"version,omitempty"`
	Description string        `json:"description,omitempty"`
	Tags        workflow.Tags `json:"tags,omitempty"`
	// InheritFrom maps job types to the versions this template inherits
	// from; always written, {} when none, as Maestro writes it.
	InheritFrom map[string]string `json:"inherit_from"`
	Params      workflow.Params   `json:"params,omitempty"`
}

// StepTypes are the step types a template may be for: every type of the
// step-type table (workflow.StepTypes), Maestro's and this implementation's.
var StepTypes = workflow.StepTypeNames()

// Check validates a template and sets its version to DefaultVersion when
// unset.
func (t *Template) Check() error {
	var problems []string
	d := &t.Definition
	if d.Version == "" {
		d.Version = DefaultVersion
	}
	for name, v := range map[string]string{"definition.job_type": d.JobType, "definition.version": d.Version} {
		if !referenceID(v) {
			problems = append(problems, fmt.Sprintf("%s: %q must be 1 to 128 letters, digits, '.', '-' or '_'", name, v))
		}
	}
	canonical := ""
	for _, st := range StepTypes {
		if strings.EqualFold(st, d.StepType) {
			canonical = st
		}
	}
	if canonical == "" {
		problems = append(problems, fmt.Sprintf("definition.step_type: %q is not one of %s", d.StepType, strings.Join(StepTypes, ", ")))
	}
	d.StepType = canonical
	for k, v := range d.InheritFrom {
		if !referenceID(k) || !referenceID(v) {
			problems = append(problems, fmt.Sprintf("definition.inherit_from: %q: %q is not a job type and version", k, v))
		}
		if k == d.JobType {
			problems = append(problems, "definition.inherit_from: a template cannot inherit from its own job type")
		}
	}
	m := &t.Metadata
	if len(m.Owner) == 0 || string(m.Owner) == "null" {
		problems = append(problems, "owner is required")
	}
	if m.Status == "" {
		problems = append(problems, "status is required")
	}
	if m.Support == "" {
		problems = append(problems, "support is required")
	}
	for _, k := range metadataFields {
		if _, ok := m.Extra[k]; ok {
			problems = append(problems, fmt.Sprintf("%s is set by Maestro", k))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

func referenceID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// Store keeps job templates in PostgreSQL.
type Store struct{ db *pgxpool.Pool }

// NewStore returns a store over db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

const (
	sqlUpsert = `
INSERT INTO job_template (job_type, version, step_type, template, created_by) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (job_type, version) DO UPDATE SET step_type = EXCLUDED.step_type, template = EXCLUDED.template,
    created_by = EXCLUDED.created_by, modify_time = now()`
	sqlGet       = `SELECT template FROM job_template WHERE job_type = $1 AND version = $2`
	sqlList      = `SELECT template FROM job_template WHERE version = $1 ORDER BY job_type`
	sqlDeleteOne = `DELETE FROM job_template WHERE job_type = $1 AND version = $2`
	sqlDeleteAll = `DELETE FROM job_template WHERE job_type = $1`
	// sqlOwner: a job type's owner is who created its oldest template.
	sqlOwner = `SELECT created_by FROM job_template WHERE job_type = $1 ORDER BY create_time, version LIMIT 1`
)

// Owner returns who owns a job type's templates (who created the first);
// "" with ok false when it has none.
func (s *Store) Owner(ctx context.Context, jobType string) (owner string, ok bool, err error) {
	err = s.db.QueryRow(ctx, sqlOwner, jobType).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the owner of job type %s: %w", jobType, err)
	}
	return owner, true, nil
}

// Upsert stores a checked template by author (its version author, created
// now) and returns it as stored.
func (s *Store) Upsert(ctx context.Context, t *Template, author string) (*Template, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	t.Metadata.VersionAuthor = author
	t.Metadata.CreateTime = time.Now().UnixMilli()
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode job template %s: %w", t.Definition.JobType, err)
	}
	if _, err := s.db.Exec(ctx, sqlUpsert, t.Definition.JobType, t.Definition.Version, t.Definition.StepType, raw, author); err != nil {
		return nil, fmt.Errorf("store job template %s version %s: %w", t.Definition.JobType, t.Definition.Version, err)
	}
	return t, nil
}

// Get returns the template of a job type at a version tag.
func (s *Store) Get(ctx context.Context, jobType, version string) (*Template, error) {
	var raw []byte
	err := s.db.QueryRow(ctx, sqlGet, jobType, version).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("no job template found for job_type [%s] and version [%s]: %w", jobType, version, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read job template %s version %s: %w", jobType, version, err)
	}
	return decode(raw)
}

// List returns the templates at a version tag, by job type.
func (s *Store) List(ctx context.Context, version string) ([]*Template, error) {
	rows, err := s.db.Query(ctx, sqlList, version)
	if err != nil {
		return nil, fmt.Errorf("list job templates of version %s: %w", version, err)
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("list job templates of version %s: %w", version, err)
	}
	out := make([]*Template, 0, len(raws))
	for _, raw := range raws {
		t, err := decode(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Delete removes a job type's template at a version, or at every version
// when version is "", and returns how many it removed.
func (s *Store) Delete(ctx context.Context, jobType, version string) (int64, error) {
	var tag pgconn.CommandTag
	var err error
	if version == "" {
		tag, err = s.db.Exec(ctx, sqlDeleteAll, jobType)
	} else {
		tag, err = s.db.Exec(ctx, sqlDeleteOne, jobType, version)
	}
	if err != nil {
		return 0, fmt.Errorf("delete job template %s: %w", jobType, err)
	}
	return tag.RowsAffected(), nil
}

// decode reads a stored template.
func decode(raw []byte) (*Template, error) {
	var stored struct {
		Metadata   map[string]json.RawMessage `json:"metadata"`
		Definition json.RawMessage            `json:"definition"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, fmt.Errorf("decode job template: %w", err)
	}
	t := &Template{}
	if err := json.Unmarshal(raw, &struct {
		Metadata *Metadata `json:"metadata"`
	}{&t.Metadata}); err != nil {
		return nil, fmt.Errorf("decode job template metadata: %w", err)
	}
	for _, k := range metadataFields {
		delete(stored.Metadata, k)
	}
	if len(stored.Metadata) > 0 {
		t.Metadata.Extra = stored.Metadata
	}
	if err := json.Unmarshal(stored.Definition, &t.Definition); err != nil {
		return nil, fmt.Errorf("decode job template definition: %w", err)
	}
	if t.Definition.InheritFrom == nil {
		t.Definition.InheritFrom = map[string]string{}
	}
	return t, nil
}

// Params returns the params a step of stepType with sub_type jobType
// inherits at version: those of the templates the job type's template
// inherits from (depth first, in job type order), then its own, later ones
// replacing earlier ones of the same name. nil when the job type has no
// template; an error when the template is for another step type or the
// inheritance loops.
func (s *Store) Params(ctx context.Context, stepType, jobType, version string) (workflow.Params, error) {
	t, err := s.Get(ctx, jobType, version)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(t.Definition.StepType, stepType) {
		return nil, fmt.Errorf("%w: job template %s is for %s steps, not %s", ErrInvalid, jobType, t.Definition.StepType, stepType)
	}
	out := workflow.Params{}
	if err := s.inherit(ctx, t, out, map[string]bool{jobType: true}); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) inherit(ctx context.Context, t *Template, out workflow.Params, visiting map[string]bool) error {
	for _, parent := range slices.Sorted(maps.Keys(t.Definition.InheritFrom)) {
		if visiting[parent] {
			return fmt.Errorf("%w: job template %s inherits from itself through %s", ErrInvalid, t.Definition.JobType, parent)
		}
		p, err := s.Get(ctx, parent, t.Definition.InheritFrom[parent])
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		visiting[parent] = true
		if err := s.inherit(ctx, p, out, visiting); err != nil {
			return err
		}
		delete(visiting, parent)
	}
	maps.Copy(out, t.Definition.Params)
	return nil
}
