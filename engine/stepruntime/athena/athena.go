// Package athena is the Athena step runtime: each attempt runs one SQL
// query with StartQueryExecution, configured by the step's `athena` MAP
// param (query, database, catalog, workgroup, output_location), and ends
// with the query: its execution id, state, result location, data scanned
// and its first rows become output params. It runs on the awsjob
// machinery: the attempt's uuid is the query's ClientRequestToken (Athena
// answers a repeated start with the same query) and is written into the
// query text as a trailing comment, by which a new owner after a crash
// finds the query among the workgroup's recent executions. See
// docs/step-runtimes.md.
package athena

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"

	"github.com/maestro-aws/maestro/engine/stepruntime"
	"github.com/maestro-aws/maestro/engine/stepruntime/awsjob"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// Type is the step type this runtime runs.
const Type = "Athena"

// Param is the MAP param holding the query.
const Param = "athena"

// Service is the service's name in the job registry.
const Service = "athena"

// Output params of a query that succeeded.
const (
	OutputQueryExecutionID = "query_execution_id"
	OutputState            = "state"
	OutputLocation         = "output_location"
	OutputDataScanned      = "data_scanned_bytes"
	OutputColumns          = "columns"
	// OutputRows is the first rows (max_rows) as JSON text: an array of
	// objects, column to value (a NULL is null).
	OutputRows = "rows"
	// OutputFirstRow is the first row, column to value.
	OutputFirstRow = "first_row"
	// OutputRowCount is how many rows OutputRows holds.
	OutputRowCount = "row_count"
)

// Event is how the query's state-change events name it.
var Event = awsjob.EventSource{Source: "aws.athena", DetailType: "Athena Query State Change",
	IDField: "queryExecutionId", Service: Service}

// DefaultMaxRows and MaxRows bound the rows kept as outputs.
const (
	DefaultMaxRows = 10
	MaxRows        = 100
)

// Marker starts the comment appended to the query, naming the attempt.
const Marker = "-- maestro step_instance_uuid="

// findPages bounds the pages of ListQueryExecutions a lookup reads.
const findPages = 4

var fields = []string{"query", "database", "catalog", "workgroup", "output_location", "max_rows"}

// API is the part of the Athena client the runtime uses; *athena.Client
// has it.
type API interface {
	StartQueryExecution(ctx context.Context, in *athena.StartQueryExecutionInput, opts ...func(*athena.Options)) (*athena.StartQueryExecutionOutput, error)
	GetQueryExecution(ctx context.Context, in *athena.GetQueryExecutionInput, opts ...func(*athena.Options)) (*athena.GetQueryExecutionOutput, error)
	GetQueryResults(ctx context.Context, in *athena.GetQueryResultsInput, opts ...func(*athena.Options)) (*athena.GetQueryResultsOutput, error)
	StopQueryExecution(ctx context.Context, in *athena.StopQueryExecutionInput, opts ...func(*athena.Options)) (*athena.StopQueryExecutionOutput, error)
	ListQueryExecutions(ctx context.Context, in *athena.ListQueryExecutionsInput, opts ...func(*athena.Options)) (*athena.ListQueryExecutionsOutput, error)
	BatchGetQueryExecution(ctx context.Context, in *athena.BatchGetQueryExecutionInput, opts ...func(*athena.Options)) (*athena.BatchGetQueryExecutionOutput, error)
}

// New returns the Athena runtime over client.
func New(client API, cfg awsjob.Config) (stepruntime.Runtime, error) {
	if client == nil {
		return nil, fmt.Errorf("athena: a client is required")
	}
	return awsjob.New(svc{client}, cfg)
}

type svc struct{ c API }

type spec struct {
	Query, Database, Catalog, Workgroup, OutputLocation string
	MaxRows                                             int32
}

func (svc) Name() string { return Service }

func (s svc) Check(a *stepruntime.Attempt) error {
	_, err := read(a)
	return err
}

func read(a *stepruntime.Attempt) (*spec, error) {
	r, err := awsjob.ReadSpec(a, Param, fields, "query (and database, catalog, workgroup, output_location, max_rows)")
	if err != nil {
		return nil, err
	}
	sp := &spec{Query: r.String("query"), Database: r.String("database"), Catalog: r.String("catalog"),
		Workgroup: r.String("workgroup"), OutputLocation: r.String("output_location"),
		MaxRows: int32(r.Long("max_rows", DefaultMaxRows, 0, MaxRows))}
	r.Require("query", sp.Query)
	if sp.OutputLocation != "" && !strings.HasPrefix(sp.OutputLocation, "s3://") {
		return nil, fmt.Errorf("%s.output_location %q: want an s3:// location", Param, sp.OutputLocation)
	}
	if sp.Workgroup == "" {
		sp.Workgroup = "primary"
	}
	return sp, r.Err()
}

// token is the ClientRequestToken (32 to 128 characters) of the attempt.
func token(key string) string { return "maestro-" + key }

// Start implements awsjob.Service.
func (s svc) Start(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, error) {
	sp, err := read(a)
	if err != nil {
		return "", nil, err
	}
	in := &athena.StartQueryExecutionInput{
		QueryString:        aws.String(strings.TrimRight(sp.Query, " \t\r\n") + "\n" + Marker + key),
		ClientRequestToken: aws.String(token(key)),
		WorkGroup:          aws.String(sp.Workgroup),
	}
	if sp.Database != "" || sp.Catalog != "" {
		in.QueryExecutionContext = &types.QueryExecutionContext{}
		if sp.Database != "" {
			in.QueryExecutionContext.Database = aws.String(sp.Database)
		}
		if sp.Catalog != "" {
			in.QueryExecutionContext.Catalog = aws.String(sp.Catalog)
		}
	}
	if sp.OutputLocation != "" {
		in.ResultConfiguration = &types.ResultConfiguration{OutputLocation: aws.String(sp.OutputLocation)}
	}
	out, err := s.c.StartQueryExecution(ctx, in)
	if err != nil {
		return "", nil, err
	}
	return aws.ToString(out.QueryExecutionId), map[string]any{"workgroup": sp.Workgroup}, nil
}

// Find implements awsjob.Service: the workgroup's recent executions whose
// query ends with the attempt's marker.
func (s svc) Find(ctx context.Context, a *stepruntime.Attempt, key string) (string, map[string]any, bool, error) {
	sp, err := read(a)
	if err != nil {
		return "", nil, false, err
	}
	var next *string
	for range findPages {
		list, err := s.c.ListQueryExecutions(ctx, &athena.ListQueryExecutionsInput{WorkGroup: aws.String(sp.Workgroup), NextToken: next})
		if err != nil {
			return "", nil, false, fmt.Errorf("ListQueryExecutions: %w", err)
		}
		ids := list.QueryExecutionIds
		for len(ids) > 0 {
			n := min(len(ids), 50)
			got, err := s.c.BatchGetQueryExecution(ctx, &athena.BatchGetQueryExecutionInput{QueryExecutionIds: ids[:n]})
			if err != nil {
				return "", nil, false, fmt.Errorf("BatchGetQueryExecution: %w", err)
			}
			for _, q := range got.QueryExecutions {
				if strings.HasSuffix(aws.ToString(q.Query), Marker+key) {
					return aws.ToString(q.QueryExecutionId), map[string]any{"workgroup": sp.Workgroup}, true, nil
				}
			}
			ids = ids[n:]
		}
		if next = list.NextToken; next == nil {
			break
		}
	}
	return "", nil, false, nil
}

// Describe implements awsjob.Service.
func (s svc) Describe(ctx context.Context, a *stepruntime.Attempt, id string) (awsjob.Status, error) {
	out, err := s.c.GetQueryExecution(ctx, &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(id)})
	if err != nil {
		return awsjob.Status{}, err
	}
	q := out.QueryExecution
	if q == nil || q.Status == nil {
		return awsjob.Status{}, fmt.Errorf("GetQueryExecution %s: empty answer", id)
	}
	st := awsjob.Status{State: string(q.Status.State), Message: aws.ToString(q.Status.StateChangeReason)}
	var location string
	var scanned int64
	if q.ResultConfiguration != nil {
		location = aws.ToString(q.ResultConfiguration.OutputLocation)
	}
	if q.Statistics != nil {
		scanned = aws.ToInt64(q.Statistics.DataScannedInBytes)
	}
	switch q.Status.State {
	case types.QueryExecutionStateSucceeded:
		st.Phase = awsjob.Succeeded
	case types.QueryExecutionStateFailed:
		st.Phase = awsjob.Failed
		if e := q.Status.AthenaError; e != nil {
			st.Platform = aws.ToInt32(e.ErrorCategory) == 1 // SYSTEM
			if aws.ToString(e.ErrorMessage) != "" && st.Message == "" {
				st.Message = aws.ToString(e.ErrorMessage)
			}
		}
	case types.QueryExecutionStateCancelled:
		st.Phase = awsjob.Cancelled
	default:
		return st, nil
	}
	st.Data = map[string]any{OutputLocation: location, OutputDataScanned: scanned}
	st.Outputs = map[string]any{
		OutputQueryExecutionID: awsjob.Output(workflow.ParamTypeString, id),
		OutputState:            awsjob.Output(workflow.ParamTypeString, st.State),
		OutputLocation:         awsjob.Output(workflow.ParamTypeString, location),
		OutputDataScanned:      awsjob.Output(workflow.ParamTypeLong, scanned),
	}
	if st.Phase != awsjob.Succeeded {
		return st, nil
	}
	sp, err := read(a)
	if err != nil || sp.MaxRows == 0 || q.StatementType != types.StatementTypeDml {
		return st, nil
	}
	cols, rows, err := s.firstRows(ctx, id, sp.MaxRows)
	if err != nil {
		return awsjob.Status{}, err
	}
	st.Outputs[OutputColumns] = awsjob.Output(workflow.ParamTypeStringArray, cols)
	text, _ := json.Marshal(rows)
	st.Outputs[OutputRows] = awsjob.Output(workflow.ParamTypeString, string(text))
	st.Outputs[OutputRowCount] = awsjob.Output(workflow.ParamTypeLong, int64(len(rows)))
	first := map[string]string{}
	if len(rows) > 0 {
		for k, v := range rows[0] {
			if v != nil {
				first[k] = *v
			}
		}
	}
	st.Outputs[OutputFirstRow] = awsjob.Output(workflow.ParamTypeStringMap, first)
	return st, nil
}

// firstRows reads up to n rows of a DML query's result.
func (s svc) firstRows(ctx context.Context, id string, n int32) ([]string, []map[string]*string, error) {
	out, err := s.c.GetQueryResults(ctx, &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id), MaxResults: aws.Int32(n + 1)})
	if err != nil {
		return nil, nil, err
	}
	if out.ResultSet == nil || out.ResultSet.ResultSetMetadata == nil {
		return nil, nil, nil
	}
	cols := make([]string, 0, len(out.ResultSet.ResultSetMetadata.ColumnInfo))
	for _, c := range out.ResultSet.ResultSetMetadata.ColumnInfo {
		cols = append(cols, aws.ToString(c.Name))
	}
	raw := out.ResultSet.Rows
	if len(raw) > 0 {
		raw = raw[1:] // the first page of a DML query's result starts with the column names
	}
	rows := make([]map[string]*string, 0, min(len(raw), int(n)))
	for _, r := range raw {
		if len(rows) == int(n) {
			break
		}
		row := make(map[string]*string, len(cols))
		for i, c := range cols {
			if i < len(r.Data) {
				row[c] = r.Data[i].VarCharValue
			}
		}
		rows = append(rows, row)
	}
	return cols, rows, nil
}

// Stop implements awsjob.Service: StopQueryExecution.
func (s svc) Stop(ctx context.Context, _ *stepruntime.Attempt, id string) error {
	_, err := s.c.StopQueryExecution(ctx, &athena.StopQueryExecutionInput{QueryExecutionId: aws.String(id)})
	return err
}
