// Package definition stores workflow definitions: immutable numbered
// versions, the active version, properties snapshots and the workflow
// timeline, and deletes workflows with their instances.
//
// Every change is one transaction that first locks the workflow's row, so
// concurrent changes of one workflow serialise and version and snapshot
// numbers have no gaps. The SQL is in queries.go.
package definition

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/authz"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Errors the store returns, wrapped with what was being done. Transport
// adapters map them with errors.Is.
var (
	// ErrNotFound reports a workflow, version or snapshot that does not
	// exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalidSelector reports a version selector that is not one of the
	// accepted forms (the model's workflow.ErrInvalidVersionSelector).
	ErrInvalidSelector = workflow.ErrInvalidVersionSelector
	// ErrForbidden reports a change that only the workflow's owner or an
	// administrator may make.
	ErrForbidden = errors.New("forbidden")
	// ErrConflict reports a change the workflow's current state does not
	// allow (for example deleting it while it has live runs).
	ErrConflict = errors.New("conflict")
	// ErrDeleting reports a push of a workflow id whose earlier workflow is
	// still being deleted; it succeeds once the deletion is done.
	ErrDeleting = errors.New("workflow is being deleted")
)

// Anonymous names a caller without an identity.
const Anonymous = "anonymous"

// Actor is who asks for a change.
type Actor struct {
	// Name is the caller; empty means Anonymous.
	Name string
	// Admin may change any workflow (authz.Policy.IsAdmin).
	Admin bool
}

// Who returns the actor's name, Anonymous when it has none.
func (a Actor) Who() string {
	if a.Name == "" {
		return Anonymous
	}
	return a.Name
}

// mayChange reports whether the actor may change a workflow owned by owner
// (push a version, activate, change properties, delete). The API decides
// first (docs/security.md); the store checks again under the workflow's row
// lock, so an ownership change racing the request cannot slip through.
func (a Actor) mayChange(owner string) bool { return a.Admin || authz.Matches(owner, a.Who()) }

// Store is the definitions store.
type Store struct {
	db                *pgxpool.Pool
	inlineDeleteLimit int
	deleteBatchSize   int
}

// Defaults of the Store's options.
const (
	DefaultInlineDeleteLimit = 1000
	DefaultDeleteBatchSize   = 500
)

// Option configures a Store.
type Option func(*Store)

// WithInlineDeleteLimit sets how many instance runs Delete removes in its
// own transaction; a workflow with more is deleted through the
// DeleteWorkflow queue (default DefaultInlineDeleteLimit).
func WithInlineDeleteLimit(n int) Option {
	return func(s *Store) {
		if n >= 0 {
			s.inlineDeleteLimit = n
		}
	}
}

// WithDeleteBatchSize sets how many instance runs ProcessDelete removes per
// transaction (default DefaultDeleteBatchSize).
func WithDeleteBatchSize(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.deleteBatchSize = n
		}
	}
}

// NewStore wraps db.
func NewStore(db *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{db: db, inlineDeleteLimit: DefaultInlineDeleteLimit, deleteBatchSize: DefaultDeleteBatchSize}
	for _, o := range opts {
		o(s)
	}
	return s
}

// VersionMetadata is the metadata of a version as stored: the push's
// git_info and its other top-level fields (Maestro's metadata extra info).
type VersionMetadata struct {
	GitInfo *workflow.GitInfo          `json:"git_info,omitempty"`
	Extra   map[string]json.RawMessage `json:"extra,omitempty"`
}

// metadataOf returns the canonical JSON of d's metadata, nil when d has
// none.
func metadataOf(d *workflow.Definition) ([]byte, error) {
	if d.GitInfo == nil && len(d.Extra) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(VersionMetadata{GitInfo: d.GitInfo, Extra: d.Extra})
	if err != nil {
		return nil, err
	}
	return workflow.CanonicalJSON(raw)
}

// Snapshot is one numbered snapshot of a workflow's properties.
type Snapshot struct {
	WorkflowID string          `json:"workflow_id"`
	Version    int64           `json:"snapshot_version"`
	Properties json.RawMessage `json:"properties"`
	Author     string          `json:"author"`
	CreateTime time.Time       `json:"create_time"`
	// Owner is the workflow's owner: properties.owner, else its creator.
	Owner string `json:"-"`
}

// Created is what Create did.
type Created struct {
	Version *Version
	// New is false when the definition matched the latest version, which
	// is returned instead.
	New bool
	// Activated is true when the push changed the active version.
	Activated bool
	// PropertiesChanged is true when the push added a properties snapshot.
	PropertiesChanged bool
	// HandedTo names the owner the push handed the workflow to when that is
	// not the pusher (properties.owner naming someone else): the pusher
	// may no longer change it or act on its runs. "" otherwise.
	HandedTo string
}

// Create stores d as the workflow's next version on behalf of caller; see
// CreateAs.
func (s *Store) Create(ctx context.Context, d *workflow.Definition, caller string) (*Created, error) {
	return s.CreateAs(ctx, d, Actor{Name: caller})
}

// wfState is the workflow row as a change transaction found it.
type wfState struct {
	latest       int64
	active       *int64
	props        []byte
	propsVersion int64
	owner        string
	createdBy    string
}

// CreateAs stores d, which must have been validated, as the workflow's next
// version unless it is identical to the latest version, which is returned
// instead. A push to an existing workflow needs its owner or an
// administrator (ErrForbidden); the first push makes the actor (or
// d.Properties.Owner) the owner. A new version becomes active unless
// d.IsActive is false; an unchanged push activates the latest version only
// when d.IsActive is explicitly true. d.Properties is merged into the
// workflow's properties; when that changes them a new snapshot is added.
// The first push of a workflow always adds snapshot 1. Everything happens
// in one transaction.
func (s *Store) CreateAs(ctx context.Context, d *workflow.Definition, actor Actor) (*Created, error) {
	id := d.Workflow.ID
	raw, err := json.Marshal(&d.Workflow)
	if err != nil {
		return nil, fmt.Errorf("encode workflow %s: %w", id, err)
	}
	canonical, err := d.Canonical()
	if err != nil {
		return nil, fmt.Errorf("canonicalise workflow %s: %w", id, err)
	}
	meta, err := metadataOf(d)
	if err != nil {
		return nil, fmt.Errorf("encode workflow %s metadata: %w", id, err)
	}
	// A push is unchanged when its workflow and its metadata are the
	// latest version's; a push without metadata has the fingerprint of
	// the workflow alone, as before metadata was kept.
	sum := sha256.Sum256(append(canonical, meta...))
	author := actor.Who()
	initialOwner := author
	if d.Properties != nil && d.Properties.Owner != nil && d.Properties.Owner.Name != "" {
		initialOwner = d.Properties.Owner.Name
	}
	var out *Created
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var st wfState
		var inserted bool
		if err := tx.QueryRow(ctx, sqlUpsertWorkflow, id, initialOwner, author).Scan(&inserted, &st.latest, &st.active,
			&st.props, &st.propsVersion, &st.owner, &st.createdBy); err != nil {
			return fmt.Errorf("lock workflow %s: %w", id, err)
		}
		var latestSum []byte
		var deleting bool
		if err := tx.QueryRow(ctx, sqlLatestFingerprint, id, st.latest).Scan(&latestSum, &deleting); err != nil {
			return fmt.Errorf("read workflow %s: %w", id, err)
		}
		if deleting {
			return fmt.Errorf("workflow %s: an earlier workflow of this id is still being deleted; push again later: %w", id, ErrDeleting)
		}
		props, err := mergedProperties(st.props, workflow.PropertiesChange{Set: d.Properties})
		if err != nil {
			return fmt.Errorf("workflow %s: %w", id, err)
		}
		propsChanged := st.propsVersion == 0 || !bytes.Equal(props.canonical, props.currentCanonical)
		if !inserted && !actor.mayChange(st.owner) {
			return forbidden(id, st.owner, "push a version of")
		}

		c := &Created{New: !bytes.Equal(latestSum, sum[:])}
		version, active := st.latest, st.active
		if c.New {
			version = st.latest + 1
			if d.IsActive == nil || *d.IsActive {
				active = &version
			}
		} else if d.IsActive != nil && *d.IsActive && (active == nil || *active != version) {
			active = &version
		}
		c.Activated = !sameVersion(active, st.active)
		c.PropertiesChanged = propsChanged
		if owner := props.owner(st.createdBy); (inserted || owner != st.owner) && !authz.Matches(owner, author) {
			c.HandedTo = owner
		}

		b := &pgx.Batch{}
		snap := &Snapshot{WorkflowID: id, Version: st.propsVersion, Properties: st.props, Owner: st.owner}
		if propsChanged {
			snap = &Snapshot{WorkflowID: id, Version: st.propsVersion + 1, Properties: props.json, Author: author,
				Owner: props.owner(st.createdBy)}
			queueSnapshot(b, snap, props.owner(st.createdBy))
			queueTimeline(b, id, timelineEntry{Type: EventUpdateProperties, Author: author, SnapshotVersion: snap.Version,
				Message: fmt.Sprintf("added properties snapshot %d", snap.Version)})
		} else if c.New {
			b.Queue(sqlSnapshotMeta, id, st.propsVersion).QueryRow(func(r pgx.Row) error {
				return r.Scan(&snap.Author, &snap.CreateTime)
			})
		}
		var createdAt time.Time
		if c.New {
			b.Queue(sqlInsertVersion, id, version, raw, sum[:], author, meta).QueryRow(func(r pgx.Row) error { return r.Scan(&createdAt) })
			msg := fmt.Sprintf("created version %d", version)
			if c.Activated {
				msg += " and activated it"
			}
			queueTimeline(b, id, timelineEntry{Type: EventCreateVersion, Author: author, Message: msg, Version: version,
				Details: map[string]any{"is_active": c.Activated}})
		} else if c.Activated {
			queueTimeline(b, id, timelineEntry{Type: EventActivate, Author: author, Version: version,
				Message: fmt.Sprintf("activated version %d (pushed unchanged with is_active)", version)})
		}
		if c.New || c.Activated {
			b.Queue(sqlSetVersions, id, version, active, author, c.Activated)
		}
		queuePushEvents(b, pushed{workflowID: id, name: d.Workflow.Name, author: author, created: c, version: version,
			snapshot: snap.Version, active: active, previous: st.active})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("store workflow %s version %d: %w", id, version, err)
		}
		if c.Activated || c.PropertiesChanged {
			if err := syncTriggers(ctx, tx, id); err != nil {
				return err
			}
		}
		if !c.New {
			v, err := getVersion(ctx, tx, id, version, "")
			if err != nil {
				return err
			}
			c.Version = v
			out = c
			return nil
		}
		c.Version = &Version{
			WorkflowID: id, Version: version, Workflow: d.Workflow, Raw: raw,
			Active: active != nil && *active == version, CreatedBy: author, CreatedAt: createdAt,
			Properties: snap.Properties, ActiveVersion: active, LatestVersion: version, Snapshot: snap,
			Metadata: meta, ModifyTime: createdAt,
		}
		if c.Version.Active {
			c.Version.ActivateTime, c.Version.ActivatedBy = &createdAt, author
		}
		out = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func sameVersion(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// merged is a properties change merged into the current properties.
type merged struct {
	props            *workflow.Properties
	json             []byte
	canonical        []byte
	currentCanonical []byte
}

// owner returns the owner the merged properties name, else createdBy.
func (m *merged) owner(createdBy string) string {
	if m.props.Owner != nil && m.props.Owner.Name != "" {
		return m.props.Owner.Name
	}
	return createdBy
}

func mergedProperties(current []byte, change workflow.PropertiesChange) (*merged, error) {
	cur := &workflow.Properties{}
	if len(bytes.TrimSpace(current)) > 0 {
		p, err := workflow.DecodeProperties(current)
		if err != nil {
			return nil, fmt.Errorf("decode stored properties: %w", err)
		}
		cur = p
	}
	m := &merged{props: change.Apply(cur)}
	var err error
	if m.json, err = json.Marshal(m.props); err != nil {
		return nil, fmt.Errorf("encode properties: %w", err)
	}
	if m.canonical, err = m.props.Canonical(); err != nil {
		return nil, fmt.Errorf("canonicalise properties: %w", err)
	}
	if m.currentCanonical, err = cur.Canonical(); err != nil {
		return nil, fmt.Errorf("canonicalise properties: %w", err)
	}
	return m, nil
}

// queueSnapshot adds snap and makes it the workflow's current properties;
// it fills snap.CreateTime when the batch runs.
func queueSnapshot(b *pgx.Batch, snap *Snapshot, owner string) {
	b.Queue(sqlInsertSnapshot, snap.WorkflowID, snap.Version, snap.Properties, snap.Author).
		QueryRow(func(r pgx.Row) error { return r.Scan(&snap.CreateTime) })
	b.Queue(sqlSetProperties, snap.WorkflowID, snap.Properties, snap.Version, owner)
}
