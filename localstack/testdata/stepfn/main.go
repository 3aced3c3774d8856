// Command stepfn is the Lambda function the step runtime tests deploy to
// the emulator. Its input says what to do:
//
//   - {"n": 21, "name": "x"} returns {"doubled": 42, "echo": "x"};
//   - {"action": "fail"} fails;
//   - {"action": "callback", "api": URL, "rows": 5, "maestro": {...}} (an
//     asynchronous Lambda step's payload) sets the output param rows with
//     PUT /api/v3/output-data and then calls PUT /api/v3/step-completion.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-lambda-go/lambda"
)

type input struct {
	N       int64          `json:"n"`
	Name    string         `json:"name"`
	Action  string         `json:"action"`
	API     string         `json:"api"`
	Rows    int64          `json:"rows"`
	Maestro map[string]any `json:"maestro"`
}

func handle(ctx context.Context, in input) (any, error) {
	switch in.Action {
	case "fail":
		return nil, errors.New("asked to fail")
	case "callback":
		out := map[string]any{"params": map[string]any{"rows": map[string]any{"type": "LONG", "value": in.Rows}}}
		if err := put(ctx, in.API+"/api/v3/output-data", in.Maestro, out); err != nil {
			return nil, err
		}
		done := map[string]any{"state": "DONE", "message": fmt.Sprintf("loaded %d rows", in.Rows)}
		return nil, put(ctx, in.API+"/api/v3/step-completion", in.Maestro, done)
	}
	return map[string]any{"doubled": in.N * 2, "echo": in.Name}, nil
}

// put sends the attempt's identity with the fields of body.
func put(ctx context.Context, url string, identity, body map[string]any) error {
	msg := map[string]any{}
	for k, v := range identity {
		msg[k] = v
	}
	for k, v := range body {
		msg[k] = v
	}
	b, _ := json.Marshal(msg)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("PUT %s: %d %s", url, resp.StatusCode, text)
	}
	return nil
}

func main() { lambda.Start(handle) }
