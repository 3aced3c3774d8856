package dbtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What benchmarks report besides time: the CPU this process and the test
// cluster's PostgreSQL used, which share the machine's cores.

// ServerCPU is the CPU the test cluster's PostgreSQL has used: its
// postmaster's and every backend's, from /proc (0 where there is none).
func ServerCPU() time.Duration {
	b, err := os.ReadFile(filepath.Join(ClusterDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _, _ := strings.Cut(string(b), "\n")
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range procs {
		st, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces): state ppid ...
		// utime is the 14th field, stime the 15th, cutime and cstime the
		// 16th and 17th.
		i := strings.LastIndexByte(string(st), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 15 {
			continue
		}
		self := strings.HasPrefix(p, "/proc/"+pid+"/")
		if f[1] != pid && !self {
			continue
		}
		for _, k := range []int{11, 12} {
			v, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += v
		}
		if self { // backends that have exited
			for _, k := range []int{13, 14} {
				v, _ := strconv.ParseInt(f[k], 10, 64)
				ticks += v
			}
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // CLK_TCK = 100
}

// ProcessCPU is the CPU this process has used (user and system).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
