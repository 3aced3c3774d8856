package metrics

import (
	"net/http"
	"time"
)

// HTTP wraps h so that every request writes one EMF document: APIRequests
// (1), APIServerErrors (1 for a 5xx status, else 0) and APILatency. It suits
// a Lambda, where one invocation is one request; a busy server would
// aggregate with a Recorder instead.
func HTTP(e *Emitter, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			serverError := 0.0
			if sw.status >= 500 {
				serverError = 1
			}
			_ = e.Emit(Count(APIRequests, 1), Count(APIServerErrors, serverError), Milliseconds(APILatency, time.Since(start)))
		}()
		h.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
