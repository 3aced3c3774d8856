package e2e_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/cli"
	"github.com/maestro-aws/maestro/localstack"
)

// scenarioUI opens the web UI of the deployed API the way people do:
// `maestro ui` serves it on 127.0.0.1 and signs every request it forwards
// to API Gateway, which takes signed requests only. The page, the API
// reference and an API call all come back through it; the same call
// without a signature is refused.
func scenarioUI(t *testing.T, d *Deployment) {
	api := d.apiURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		root := cli.NewRoot(cli.Options{Stdout: w, Stderr: w, AWS: &d.AWS})
		done <- cli.Run(ctx, root, []string{"--api", api, "--sigv4", "--region", localstack.Region, "ui", "--listen", "127.0.0.1:0"})
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("maestro ui printed %q: %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/ui/`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("maestro ui printed %q", line)
	}
	base := "http://" + m[1]
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for path, want := range map[string]string{
		"/ui/":              "<title>Maestro</title>",
		"/ui/app.js":        "runPage",
		"/api/v3/docs":      "Maestro REST API",
		"/api/v3/workflows": `"items"`,
	} {
		if code, body := get(base + path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s through maestro ui: %d %.200s", path, code, body)
		}
	}
	if code, _ := get(api + "/api/v3/workflows"); code != http.StatusForbidden {
		t.Errorf("an unsigned call to the API answered %d, want 403: the proxy's signature is what lets the UI in", code)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("maestro ui exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Error("maestro ui did not stop")
	}
}
