package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A memory cap for a test process, as the engine's ECS task has one: a
// cgroup of its own with a hard memory limit, under the test's own cgroup.
// The kernel kills a process of the cgroup that would grow past the limit,
// exactly as it does to a task at its size. GOMEMLIMIT is no cap (the
// runtime only collects harder), and an address-space limit (prlimit
// --as, ulimit -v) breaks Go, which reserves far more address space than
// it uses; so the cap is a cgroup, v2 (memory.max) or v1
// (memory.limit_in_bytes), whichever this machine has writable. Tests that
// need one skip where neither is (no root, a read-only cgroup mount).

// memCap is a cgroup with a memory limit.
type memCap struct {
	dir string
	v2  bool
}

// newMemCap creates a capped cgroup for the test, or skips it.
func newMemCap(t *testing.T, limit int64) *memCap {
	t.Helper()
	for _, v2 := range []bool{true, false} {
		parent, ok := ownCgroup(v2)
		if !ok {
			continue
		}
		dir := filepath.Join(parent, fmt.Sprintf("maestro-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		c := &memCap{dir: dir, v2: v2}
		file, value := "memory.limit_in_bytes", strconv.FormatInt(limit, 10)
		if v2 {
			file = "memory.max"
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
			_ = os.Remove(dir)
			continue
		}
		if v2 {
			// No swap: the limit is on memory itself.
			_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644)
		}
		t.Cleanup(func() {
			// The processes were killed by their own cleanups (registered
			// later, run earlier); an empty cgroup can be removed.
			deadline := time.Now().Add(10 * time.Second)
			for os.Remove(dir) != nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
		})
		return c
	}
	t.Skip("no writable cgroup memory controller (cgroup v2 memory.max or v1 memory.limit_in_bytes) to cap a process with")
	return nil
}

// ownCgroup returns the directory of this process's memory cgroup.
func ownCgroup(v2 bool) (string, bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case v2 && parts[0] == "0" && parts[1] == "":
			for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
				dir := filepath.Join(root, parts[2])
				if ctl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil &&
					strings.Contains(string(ctl), "memory") {
					if _, err := os.Stat(dir); err == nil {
						return dir, true
					}
				}
			}
		case !v2 && strings.Contains(","+parts[1]+",", ",memory,"):
			dir := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			if _, err := os.Stat(filepath.Join(dir, "memory.limit_in_bytes")); err == nil {
				return dir, true
			}
		}
	}
	return "", false
}

// command returns cmd run inside the cgroup: a shell joins it, then
// execs the program, so the program never runs outside the cap.
func (c *memCap) command(name string, args ...string) *exec.Cmd {
	quoted := make([]string, 0, len(args)+1)
	for _, a := range append([]string{name}, args...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	script := fmt.Sprintf("echo $$ > '%s/cgroup.procs' && exec %s", c.dir, strings.Join(quoted, " "))
	return exec.Command("/bin/sh", "-c", script)
}

// ooms returns how many times the kernel killed a process of the cgroup
// for memory.
func (c *memCap) ooms() int64 {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// peak returns the most memory the cgroup ever used (v1:
// memory.max_usage_in_bytes, v2: memory.peak where the kernel has it), or
// 0 when unknown. It counts page cache too, which the kernel reclaims
// before it kills anything.
func (c *memCap) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// rssWatch samples a process's resident set size until stopped.
type rssWatch struct {
	max  atomic.Int64
	stop context.CancelFunc
	done sync.WaitGroup
}

func watchRSS(pid int) *rssWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &rssWatch{stop: cancel}
	w.done.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if rss := readRSS(pid); rss > w.max.Load() {
				w.max.Store(rss)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return w
}

// Max stops the watch and returns the largest RSS seen.
func (w *rssWatch) Max() int64 {
	w.stop()
	w.done.Wait()
	return w.max.Load()
}

// readRSS reads VmRSS of a process in bytes (0 once it is gone).
func readRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
