package localpg

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The proxy holds each direction for its delay: a round trip through it
// takes at least twice the delay, and many messages sent at once arrive
// after about one delay, not one delay each (it is a delay line, not a
// queue that waits for each chunk in turn).
func TestDelayProxyDelaysEachWayWithoutSerializing(t *testing.T) {
	t.Parallel()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	const delay = 20 * time.Millisecond
	p, err := NewDelayProxy(echo.Addr().String(), delay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1)
	began := time.Now()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(began); rtt < 2*delay {
		t.Fatalf("round trip %v through a %v proxy, want >= %v", rtt, delay, 2*delay)
	}
	// 50 writes, 1 ms apart: they come back about 2 delays after the last
	// one, not 50 × 2 delays later.
	began = time.Now()
	for range 50 {
		if _, err := c.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	got := make([]byte, 50)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 50*time.Millisecond+2*delay+time.Second {
		t.Fatalf("50 pipelined writes took %v through a %v proxy: it serializes", took, delay)
	}
	if string(got) != strings.Repeat("y", 50) {
		t.Fatalf("bytes %q changed or reordered", got)
	}
}
