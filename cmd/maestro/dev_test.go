package main

import (
	"bufio"
	"bytes"
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

// serverProcess is a `maestro` process serving the REST API.
type serverProcess struct {
	addr   string
	exited chan error
	rss    *rssWatch
}

// startServer runs `maestro <args> --addr 127.0.0.1:0` with env added to
// the environment, and returns once it serves (its address read from the
// line it prints). It is killed when the test ends.
func startServer(t *testing.T, args []string, env ...string) *serverProcess {
	t.Helper()
	return startServerBinary(t, maestroBinary(t), args, env...)
}

// startServerBinary is startServer with another maestro binary (an earlier
// release's).
func startServerBinary(t *testing.T, bin string, args []string, env ...string) *serverProcess {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--addr", "127.0.0.1:0")...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if testing.Verbose() {
		cmd.Stderr = io.MultiWriter(&logs, os.Stderr)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProcess{exited: make(chan error, 1), rss: watchRSS(cmd.Process.Pid)}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
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
	}()
	select {
	case p.addr = <-addr:
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("maestro %s exited: %v\n%s", args[0], err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("maestro %s did not start serving", args[0])
	}
	return p
}

// alive fails the test if the process has exited.
func (p *serverProcess) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("a maestro process exited: %v", err)
	default:
	}
}

// Issue 15, defect 5: the dev server has read, write and idle timeouts; a
// client that sends its body slowly, or stops, is cut off.
func TestDevServerCutsOffSlowClients(t *testing.T) {
	t.Parallel()
	addr := startServer(t, []string{"dev", "--read-timeout", "2s", "--idle-timeout", "2s"}, "DATABASE_URL="+dbtest.URL(t)).addr
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
