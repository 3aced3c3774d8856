package client

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// The proxy behind `maestro ui` forwards what a browser sends to the API's
// stage, signed so that the API verifies it, bodies and queries intact, and
// streams answers through as they come.
func TestProxySignsAndStreams(t *testing.T) {
	t.Parallel()
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "token")
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		checkSigV4(t, r, body, creds, "us-east-1")
		if r.Header.Get("Cookie") != "" {
			t.Errorf("a browser cookie went on: %q", r.Header.Get("Cookie"))
		}
		switch r.URL.Path {
		case "/prod/api/v3/workflows":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"method":"`+r.Method+`","q":"`+r.URL.Query().Get("q")+`","body":`+string(body)+`}`)
		case "/prod/api/v3/events":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			<-release
			_, _ = io.WriteString(w, "data: second\n\n")
		default:
			t.Errorf("the API got %s", r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer upstream.Close()
	c, err := New(Options{BaseURL: upstream.URL + "/prod", Signer: &Signer{Credentials: aws.NewCredentialsCache(creds), Region: "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(c.Proxy())
	defer proxy.Close()

	req, _ := http.NewRequest(http.MethodPost, proxy.URL+"/api/v3/workflows?q=night%20ly", strings.NewReader(`{"a":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cookie", "session=x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != `{"method":"POST","q":"night ly","body":{"a":1}}` {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}

	// The event stream's first event arrives while the API still holds the
	// stream open.
	resp, err = http.Get(proxy.URL + "/api/v3/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() { line, _ := lines.ReadString('\n'); first <- line }()
	select {
	case line := <-first:
		if line != "data: first\n" {
			t.Errorf("first line %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event did not come through before the stream ended")
	}
	close(release)
}

// An API that cannot be reached is a JSON error in Maestro's shape.
func TestProxyUnreachableAPI(t *testing.T) {
	t.Parallel()
	c, err := New(Options{BaseURL: "http://127.0.0.1:1/prod"})
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(c.Proxy())
	defer proxy.Close()
	resp, err := http.Get(proxy.URL + "/api/v3/workflows")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"retryable":true`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}
