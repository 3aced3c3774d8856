package athena

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/athena"

	"github.com/maestro-aws/maestro/engine/stepruntime"
)

type fakeAthena struct {
	API
	started []*athena.StartQueryExecutionInput
}

func (f *fakeAthena) StartQueryExecution(_ context.Context, in *athena.StartQueryExecutionInput, _ ...func(*athena.Options)) (*athena.StartQueryExecutionOutput, error) {
	f.started = append(f.started, in)
	return &athena.StartQueryExecutionOutput{QueryExecutionId: aws.String("q-1")}, nil
}

func TestStart(t *testing.T) {
	f := &fakeAthena{}
	a := &stepruntime.Attempt{UUID: "3e0c1e7a-1111-4222-8333-944455556666", Params: map[string]any{Param: map[string]any{
		"query": "SELECT 1\n", "database": "events", "catalog": "lake", "output_location": "s3://r/p/"}}}
	id, data, err := svc{f}.Start(context.Background(), a, a.UUID)
	if err != nil || id != "q-1" || data["workgroup"] != "primary" {
		t.Fatalf("start %s %v %v", id, data, err)
	}
	in := f.started[0]
	if aws.ToString(in.QueryString) != "SELECT 1\n"+Marker+a.UUID || aws.ToString(in.ClientRequestToken) != "maestro-"+a.UUID ||
		aws.ToString(in.QueryExecutionContext.Database) != "events" || aws.ToString(in.QueryExecutionContext.Catalog) != "lake" ||
		aws.ToString(in.ResultConfiguration.OutputLocation) != "s3://r/p/" || aws.ToString(in.WorkGroup) != "primary" {
		t.Fatalf("input %+v", in)
	}
	if n := len(aws.ToString(in.ClientRequestToken)); n < 32 || n > 128 {
		t.Errorf("ClientRequestToken of %d characters", n)
	}
}

func TestSpec(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{}, "query is required"},
		{map[string]any{"query": "SELECT 1", "output_location": "/tmp/x"}, "want an s3:// location"},
		{map[string]any{"query": "SELECT 1", "max_rows": int64(1000)}, "max_rows: 1000 is not within [0, 100]"},
		{map[string]any{"query": "SELECT 1", "sql": "x"}, "unknown field"},
	} {
		if _, err := read(&stepruntime.Attempt{Params: map[string]any{Param: c.m}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
}
