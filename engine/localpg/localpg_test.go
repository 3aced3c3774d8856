package localpg

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A data directory under a parent the postgres user cannot pass through
// (root's home is 0700) is out of its reach; one under open directories
// is not, even before it is made.
func TestTraversable(t *testing.T) {
	t.Parallel()
	other := &syscall.Credential{Uid: 54321, Gid: 54321}
	base, err := os.MkdirTemp("", "localpg-traverse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	closed, open := filepath.Join(base, "closed"), filepath.Join(base, "open")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if !traversable(base, other) {
		t.Skipf("%s's parents are closed to other users on this system", base)
	}
	if traversable(filepath.Join(closed, "repo", ".maestro"), other) {
		t.Error("a path under a 0700 directory of another user is traversable")
	}
	if !traversable(filepath.Join(open, "not", "made", "yet"), other) {
		t.Error("a path under 0755 directories is not traversable")
	}
}
