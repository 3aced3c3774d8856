package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// `maestro dev` wires the event services: a client following
// GET /api/v3/events sees a pushed workflow's definition change, its run's
// and steps' status changes and the alert its alerting block asks for,
// with a link to the run on dev's own address.
func TestDevStreamsEventsAndAlerts(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(maestroBinary(t), "dev", "--addr", addr)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.URL(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("maestro dev did not stop on SIGINT within 15 s with a stream open")
		}
	})
	base := "http://" + addr + "/api/v3"
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("maestro dev did not become healthy")
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events?workflow_id=devwf", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	post := func(path, body string) {
		t.Helper()
		r, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("user", "dana")
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %s", path, res.Status)
		}
	}
	post("/workflows", `{"properties":{"owner":"dana","alerting":{"emails":["dana@example.com"],"type_configs":{"RUN_SUCCESS":{}}}},
		"workflow":{"id":"devwf","steps":[{"step":{"id":"a","type":"NoOp"}}]}}`)
	post("/workflows/devwf/versions/latest/actions/start", `{}`)
	// A NoOp step runs inline and is written once, CREATED ... SUCCEEDED:
	// one step event, whose records carry every transition.
	want := []string{"WORKFLOW_DEFINITION_CHANGE_EVENT", "WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT",
		"STEP_INSTANCE_STATUS_CHANGE_EVENT", "WORKFLOW_INSTANCE_STATUS_CHANGE_EVENT", "ALERT"}
	var got []string
	var stepFinal string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for len(got) < len(want) && sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(ev["type"]))
		if recs, ok := ev["status_change_records"].([]any); ok && ev["type"] == "STEP_INSTANCE_STATUS_CHANGE_EVENT" && len(recs) > 0 {
			if last, ok := recs[len(recs)-1].(map[string]any); ok {
				stepFinal = fmt.Sprint(last["new_status"])
			}
		}
		if ev["type"] == "ALERT" && ev["link"] != "http://"+addr+"/api/v3/workflows/devwf/instances/1/runs/1" {
			t.Errorf("alert link %v", ev["link"])
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("stream got %v, want %v", got, want)
	}
	if stepFinal != "SUCCEEDED" {
		t.Errorf("the step event's last record: %q, want SUCCEEDED", stepFinal)
	}
	// A stream open does not hold up a clean stop: it ends, and so does
	// the process.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(15 * time.Second):
		t.Error("the stream did not end when maestro dev stopped")
	}
}
