package localpg

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// DelayProxy forwards TCP connections to a target, holding the bytes of
// each direction for a fixed delay. Stop with Close.
type DelayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// NewDelayProxy listens on 127.0.0.1 and forwards to target (host:port).
func NewDelayProxy(target string, delay time.Duration) (*DelayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("delay proxy: listen: %w", err)
	}
	p := &DelayProxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *DelayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the pumps.
func (p *DelayProxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *DelayProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			_ = client.Close()
			_ = server.Close()
			continue
		}
		p.wg.Add(2)
		go p.pump(server, client)
		go p.pump(client, server)
	}
}

// chunk is bytes read at a time, to be written delay later.
type chunk struct {
	b  []byte
	at time.Time
}

// pump copies src to dst, each chunk delay after it was read. A reader and
// a writer with a queue between them make it a delay line: a chunk read
// while earlier ones wait is not held back by them.
func (p *DelayProxy) pump(dst, src net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.at.Add(p.delay)); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				_ = src.Close()
				for range q {
				}
				return
			}
		}
		// src ended: pass the end on.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: buf[:n], at: time.Now()}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				_ = dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}
