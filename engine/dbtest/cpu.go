package dbtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What benchmarks report besides time: the CPU this process, other
// processes and the test cluster's PostgreSQL used, which share the
// machine's cores.

// clockTick is the kernel's CLK_TCK: /proc counts CPU time in 10 ms ticks.
const clockTick = 10 * time.Millisecond

// procStat is one process's /proc/<pid>/stat, from its state field on
// (the command before it is in parentheses and may hold spaces): fields[1]
// is the parent's pid, fields[11] and [12] the user and system ticks,
// fields[13] and [14] those of its waited-for children.
func procStat(path string) ([]string, bool) {
	st, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(st), ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(st[i+1:]))
	return f, len(f) >= 15
}

// ticks sums the fields at ks.
func ticks(f []string, ks ...int) int64 {
	var n int64
	for _, k := range ks {
		v, _ := strconv.ParseInt(f[k], 10, 64)
		n += v
	}
	return n
}

// ServerCPU is the CPU the test cluster's PostgreSQL has used: its
// postmaster's and every backend's, from /proc (0 where there is none).
func ServerCPU() time.Duration {
	b, err := os.ReadFile(filepath.Join(ClusterDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _, _ := strings.Cut(string(b), "\n")
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var n int64
	for _, p := range procs {
		f, ok := procStat(p)
		if !ok {
			continue
		}
		self := strings.HasPrefix(p, "/proc/"+pid+"/")
		if f[1] != pid && !self {
			continue
		}
		n += ticks(f, 11, 12)
		if self { // backends that have exited
			n += ticks(f, 13, 14)
		}
	}
	return time.Duration(n) * clockTick
}

// PIDCPU is the CPU (user and system) the running process pid has used.
func PIDCPU(pid int) (time.Duration, error) {
	f, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid))
	if !ok {
		return 0, fmt.Errorf("no /proc stat for process %d", pid)
	}
	return time.Duration(ticks(f, 11, 12)) * clockTick, nil
}

// MachineBusy is the CPU time the whole machine has spent busy since boot:
// every state of /proc/stat's first line but idle and iowait.
func MachineBusy() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	var n int64
	for i, field := range strings.Fields(line)[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		v, _ := strconv.ParseInt(field, 10, 64)
		n += v
	}
	return time.Duration(n) * clockTick, nil
}

// ProcessCPU is the CPU this process has used (user and system).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
