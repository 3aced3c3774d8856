package api

import (
	"net/http"
	"time"
)

// HTTPTimeouts bound how long a client may hold a connection of the API's
// HTTP server (maestro dev, maestro api): a client that sends its request
// slowly, or never reads the answer, or keeps an idle connection, is cut
// off instead of holding a goroutine and a socket forever. Behind API
// Gateway the gateway does this.
type HTTPTimeouts struct {
	// ReadHeader bounds reading the request line and headers.
	ReadHeader time.Duration
	// Read bounds reading the whole request, body included.
	Read time.Duration
	// Write bounds the time from the end of the headers to the end of the
	// response.
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
}

// DefaultHTTPTimeouts are generous for the API's requests (at most 256 KB
// in, answered in milliseconds) and short for a client that stalls.
func DefaultHTTPTimeouts() HTTPTimeouts {
	return HTTPTimeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 120 * time.Second}
}

// MaxHeaderBytes bounds the request headers the HTTP server reads.
const MaxHeaderBytes = 64 << 10

// NewHTTPServer serves h with the timeouts (a zero field takes its default)
// and MaxHeaderBytes.
func NewHTTPServer(h http.Handler, t HTTPTimeouts) *http.Server {
	d := DefaultHTTPTimeouts()
	pick := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: pick(t.ReadHeader, d.ReadHeader),
		ReadTimeout:       pick(t.Read, d.Read),
		WriteTimeout:      pick(t.Write, d.Write),
		IdleTimeout:       pick(t.Idle, d.Idle),
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}
