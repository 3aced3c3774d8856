package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// devProcess runs `maestro dev` on a free port against dsn and returns its
// address once it serves.
func devProcess(t *testing.T, dsn string, args ...string) string {
	t.Helper()
	cmd := exec.Command(maestroBinary(t), append([]string{"dev", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		re := regexp.MustCompile(`REST API on http://(\S+)/api/v3`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("maestro dev did not start serving")
	}
	return ""
}

// Issue 15, defect 5: the dev server has read, write and idle timeouts; a
// client that sends its body slowly, or stops, is cut off.
func TestDevServerCutsOffSlowClients(t *testing.T) {
	t.Parallel()
	addr := devProcess(t, dbtest.URL(t), "--read-timeout", "2s", "--idle-timeout", "2s")
	cases := map[string]string{
		// Headers promise a body that never comes.
		"stalled body": "POST /api/v3/workflows HTTP/1.1\r\nHost: x\r\nuser: alice\r\nContent-Length: 1000\r\n\r\n{\"workflow\":",
		// A complete request, then an idle kept-alive connection.
		"idle": "GET /api/v3/health HTTP/1.1\r\nHost: x\r\n\r\n",
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			got, err := io.ReadAll(conn) // returns when the server closes the connection
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the server kept the connection open for %s: %q", time.Since(start).Round(time.Second), got)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("closed after %s", d)
			}
			if name == "idle" && !strings.HasPrefix(string(got), "HTTP/1.1 200") {
				t.Fatalf("health: %q", got)
			}
		})
	}
}
