package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestRunParams(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{"a": {"type": "STRING", "value": "from file"}, "b": {"type": "LONG", "value": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := runParams(file, []string{"b=2", "x=1.5", "ok=true", "s=007a", "n=-3", "ids:LONG_ARRAY=[1,2]", "z:string=12", "e=a=b"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	want := `{"a":{"type":"STRING","value":"from file"},"b":{"type":"LONG","value":2},"e":{"type":"STRING","value":"a=b"},` +
		`"ids":{"type":"LONG_ARRAY","value":[1,2]},"n":{"type":"LONG","value":-3},"ok":{"type":"BOOLEAN","value":true},` +
		`"s":{"type":"STRING","value":"007a"},"x":{"type":"DOUBLE","value":1.5},"z":{"type":"STRING","value":"12"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	for _, bad := range [][]string{{"novalue"}, {"=x"}, {"ids:LONG_ARRAY=[1,"}} {
		if _, err := runParams("", bad); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
	if _, err := runParams(filepath.Join(t.TempDir(), "missing.json"), nil); err == nil {
		t.Error("a missing params file was accepted")
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]int{"SUCCEEDED": 0, "FAILED": 10, "TIMED_OUT": 11, "STOPPED": 12, "SOMETHING": 13} {
		if got := exitCode(status); got != want {
			t.Errorf("%s: %d, want %d", status, got, want)
		}
	}
}

func TestAPIGatewayRegion(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]string{
		"abc123.execute-api.eu-west-1.amazonaws.com":     "eu-west-1",
		"abc123.execute-api.cn-north-1.amazonaws.com.cn": "cn-north-1",
		"127.0.0.1":                 "",
		"execute-api.example.com":   "",
		"api.example.amazonaws.com": "",
	} {
		if got := apiGatewayRegion(host); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}

func TestFormatting(t *testing.T) {
	t.Parallel()
	cases := map[time.Duration]string{850 * time.Millisecond: "850ms", 12300 * time.Millisecond: "12.3s", 184 * time.Second: "3m04s", 125 * time.Minute: "2h05m", -time.Second: "0s"}
	for d, want := range cases {
		if got := duration(d); got != want {
			t.Errorf("duration(%s) = %q, want %q", d, got, want)
		}
	}
	if got := bar(3, 12, 8); got != "[##......]" {
		t.Errorf("bar = %q", got)
	}
	if got := bar(0, 0, 4); got != "[    ]" {
		t.Errorf("empty bar = %q", got)
	}
	if got := initiator(json.RawMessage(`{"type":"MANUAL","user":"alice"}`)); got != "MANUAL (alice)" {
		t.Errorf("initiator = %q", got)
	}
	a := &app{color: true}
	if got := a.status("FAILED"); got != red+"FAILED"+reset {
		t.Errorf("coloured status = %q", got)
	}
	if got := (&app{}).status("FAILED"); got != "FAILED" {
		t.Errorf("plain status = %q", got)
	}
	if !reflect.DeepEqual(inferParam("20240101"), map[string]any{"type": "LONG", "value": int64(20240101)}) {
		t.Errorf("inferParam = %v", inferParam("20240101"))
	}
}

// `maestro ui` signs with the caller's credentials: it listens on loopback
// only unless told otherwise.
func TestUIRefusesNonLoopbackListen(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"0.0.0.0:0", "10.1.2.3:8090", "example.com:8090", "nonsense"} {
		var out bytes.Buffer
		root := NewRoot(Options{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
		if code := Run(context.Background(), root, []string{"ui", "--listen", listen}); code != ExitUsage {
			t.Errorf("ui --listen %s: exit %d, want %d: %s", listen, code, ExitUsage, out.String())
		}
	}
}
