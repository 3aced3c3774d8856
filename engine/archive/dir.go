package archive

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir is a Store in a local directory (`make run`, `maestro dev`): each key
// a file under the root. A write goes to a temporary file renamed into
// place, so a reader never sees half an object.
type Dir struct {
	root string
}

// NewDir returns a store rooted at dir; the directory is made by the first
// Put.
func NewDir(dir string) (*Dir, error) {
	if dir == "" {
		return nil, errors.New("archive: directory is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("archive: directory %s: %w", dir, err)
	}
	return &Dir{root: abs}, nil
}

// Root is the directory.
func (d *Dir) Root() string { return d.root }

// Put writes the object of key.
func (d *Dir) Put(_ context.Context, key string, body []byte) error {
	if err := validKey(key); err != nil {
		return err
	}
	path := filepath.Join(d.root, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("archive: create directory for %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".put-*")
	if err != nil {
		return fmt.Errorf("archive: write %s: %w", key, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return fmt.Errorf("archive: write %s: %w", key, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("archive: sync %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("archive: write %s: %w", key, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("archive: write %s: %w", key, err)
	}
	return nil
}

// Get reads the object of key.
func (d *Dir) Get(_ context.Context, key string) ([]byte, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	body, err := os.ReadFile(filepath.Join(d.root, filepath.FromSlash(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("archive: read %s: %w", key, err)
	}
	return body, nil
}
