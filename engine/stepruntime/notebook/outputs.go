package notebook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// ScrapMIME is the output type of a value glued with scrapbook
// (sb.glue(name, value)).
const ScrapMIME = "application/scrapbook.scrap.json+json"

// cell is what Outputs reads of a notebook's cell (nbformat 4).
type cell struct {
	CellType string `json:"cell_type"`
	Outputs  []struct {
		OutputType string                     `json:"output_type"`
		Text       json.RawMessage            `json:"text"`
		Data       map[string]json.RawMessage `json:"data"`
	} `json:"outputs"`
}

// Outputs reads the output params of an executed notebook: the params of
// each {"params": {...}} object a cell printed between OutputStart and
// OutputEnd (Maestro's convention; each param typed as in Maestro,
// {"type": ..., "value": ...} or with evaluated_result), then each value
// glued with scrapbook, the later of two with one name winning.
func Outputs(raw []byte) (map[string]any, error) {
	var nb struct {
		Cells []cell `json:"cells"`
	}
	if err := json.Unmarshal(raw, &nb); err != nil {
		return nil, fmt.Errorf("not a notebook (JSON): %w", err)
	}
	out := map[string]any{}
	for _, c := range nb.Cells {
		for _, o := range c.Outputs {
			if o.OutputType == "stream" {
				if err := markedOutputs(text(o.Text), out); err != nil {
					return nil, err
				}
				continue
			}
			if t, ok := o.Data["text/plain"]; ok && o.Data[ScrapMIME] == nil {
				if err := markedOutputs(text(t), out); err != nil {
					return nil, err
				}
			}
			if scrap, ok := o.Data[ScrapMIME]; ok {
				var s struct {
					Name string `json:"name"`
					Data any    `json:"data"`
				}
				dec := json.NewDecoder(bytes.NewReader(scrap))
				dec.UseNumber()
				if err := dec.Decode(&s); err != nil || s.Name == "" {
					return nil, fmt.Errorf("a scrapbook output is not {name, data}: %s", scrap)
				}
				out[s.Name] = inferred(s.Data)
			}
		}
	}
	return out, nil
}

// text is nbformat's multi-line string: a string or a list of lines.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var lines []string
	_ = json.Unmarshal(raw, &lines)
	return strings.Join(lines, "")
}

// markedOutputs adds the params of each marked object in s to out.
func markedOutputs(s string, out map[string]any) error {
	for {
		i := strings.Index(s, OutputStart)
		if i < 0 {
			return nil
		}
		s = s[i+len(OutputStart):]
		j := strings.Index(s, OutputEnd)
		if j < 0 {
			return fmt.Errorf("%s without %s", OutputStart, OutputEnd)
		}
		body := strings.TrimSpace(s[:j])
		s = s[j+len(OutputEnd):]
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		var v struct {
			Params map[string]json.RawMessage `json:"params"`
		}
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("the output between %s and %s is not JSON: %w", OutputStart, OutputEnd, err)
		}
		for name, p := range v.Params {
			val, err := typedParam(p)
			if err != nil {
				return fmt.Errorf("output param %s: %w", name, err)
			}
			out[name] = val
		}
	}
}

// typedParam reads one of Maestro's typed params.
func typedParam(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var p struct {
		Type            workflow.ParamType `json:"type"`
		Value           any                `json:"value"`
		EvaluatedResult any                `json:"evaluated_result"`
	}
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	v := p.EvaluatedResult
	if v == nil {
		v = p.Value
	}
	if p.Type == "" {
		return inferred(v), nil
	}
	conv, err := params.Convert(p.Type, v)
	if err != nil {
		return nil, err
	}
	return params.Value{Type: p.Type, Value: conv}, nil
}

// inferred is a bare value as an output param; one no param type holds
// (an array of objects, say) as its JSON text.
func inferred(v any) any {
	if _, err := params.Infer(v); err != nil {
		b, _ := json.Marshal(v)
		return params.Value{Type: workflow.ParamTypeString, Value: string(b)}
	}
	return v
}

// S3API is the part of the S3 client S3Objects uses.
type S3API interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// S3Objects reads objects with an S3 client.
type S3Objects struct{ Client S3API }

// Read implements Objects.
func (o S3Objects) Read(ctx context.Context, bucket, key string, limit int64) ([]byte, error) {
	out, err := o.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("GetObject s3://%s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("s3://%s/%s is larger than %d bytes", bucket, key, limit)
	}
	return b, nil
}
