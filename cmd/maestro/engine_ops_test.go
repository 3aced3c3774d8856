package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// An engine configured with another group count than the one recorded by
// the first process refuses to start, saying why.
func TestEngineRefusesAGroupCountMismatch(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	first := engineProcess(t, dsn, "first", "4") // records MAESTRO_GROUP_COUNT=4
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	waitOwned(t, pool, "first", killGroups)
	_ = first.Process.Signal(syscall.SIGTERM)
	_ = first.Wait()

	var stderr bytes.Buffer
	cmd := exec.Command(maestroBinary(t), "engine")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "MAESTRO_GROUP_COUNT=8")
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an engine with 8 groups started on a deployment of 4")
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the mismatched engine kept running")
	}
	if msg := stderr.String(); !strings.Contains(msg, "flow group count mismatch") || !strings.Contains(msg, "records 4") {
		t.Errorf("stderr = %q, want the mismatch explained", msg)
	}
}

// `maestro health` (readiness) and `maestro health --live` (the container
// health check) exit 0 against a running engine's endpoint and 1 once the
// engine is gone.
func TestHealthCommand(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(maestroBinary(t), "engine")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "MAESTRO_GROUP_COUNT=4", "MAESTRO_HEALTH_ADDR="+addr, "MAESTRO_LEASE=2s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	probe := func(flags ...string) (int, string) {
		out, err := exec.Command(maestroBinary(t), append([]string{"health", "--addr", addr, "--timeout", "2s"}, flags...)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out := probe()
		if code == 0 && strings.Contains(out, "healthy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never healthy: %d %s", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, out := probe("--live"); code != 0 || !strings.Contains(out, "alive") {
		t.Errorf("--live against a running engine: exit %d %s", code, out)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if code, out := probe(); code != 1 {
		t.Errorf("after the engine died: exit %d %s, want 1", code, out)
	}
	if code, out := probe("--live"); code != 1 {
		t.Errorf("--live after the engine died: exit %d %s, want 1", code, out)
	}
}
