package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/maestro-aws/maestro/engine/metrics"
)

// emitted waits until the function whose log group is the stack output
// <function>LogGroupName has written the metric name as an EMF line (the
// emulator keeps Lambda output in CloudWatch Logs, as AWS does), and
// returns what it wrote.
func (d *Deployment) emitted(t *testing.T, stack, function, name string, timeout time.Duration) []metrics.Datum {
	t.Helper()
	group := d.Output(t, stack, function+"LogGroupName")
	logs := cloudwatchlogs.NewFromConfig(d.AWS)
	var found []metrics.Datum
	waitFor(t, fmt.Sprintf("%s writes %s to %s", function, name, group), timeout, func() (bool, string) {
		found = found[:0]
		lines := 0
		p := cloudwatchlogs.NewFilterLogEventsPaginator(logs, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: aws.String(group)})
		for p.HasMorePages() {
			page, err := p.NextPage(context.Background())
			if err != nil {
				return false, err.Error()
			}
			for _, e := range page.Events {
				lines++
				data, err := metrics.Parse([]byte(aws.ToString(e.Message)))
				if err == metrics.ErrNotEMF {
					continue
				}
				if err != nil {
					t.Errorf("%s wrote a malformed EMF line %s: %v", function, aws.ToString(e.Message), err)
					continue
				}
				for _, m := range data {
					if m.Name == name {
						found = append(found, m)
					}
				}
			}
		}
		return len(found) > 0, fmt.Sprintf("%d log lines, none with %s", lines, name)
	})
	return found
}

// alarmedAs checks that a deployed alarm reads exactly the metric m (its
// namespace, name and dimensions, as the process wrote them), and returns
// the alarm.
func (d *Deployment) alarmedAs(t *testing.T, m metrics.Datum) cwtypes.MetricAlarm {
	t.Helper()
	cw := cloudwatch.NewFromConfig(d.AWS)
	out, err := cw.DescribeAlarmsForMetric(context.Background(), &cloudwatch.DescribeAlarmsForMetricInput{
		Namespace: aws.String(m.Namespace), MetricName: aws.String(m.Name)})
	if err != nil {
		t.Fatalf("describe alarms for %s: %v", m.Name, err)
	}
	for _, a := range out.MetricAlarms {
		dims := map[string]string{}
		for _, dim := range a.Dimensions {
			dims[aws.ToString(dim.Name)] = aws.ToString(dim.Value)
		}
		if aws.ToString(a.Namespace) == m.Namespace && aws.ToString(a.MetricName) == m.Name && maps.Equal(dims, m.Dimensions) {
			return a
		}
	}
	t.Fatalf("no deployed alarm reads %s %s %v (alarms on the name: %d)", m.Namespace, m.Name, m.Dimensions, len(out.MetricAlarms))
	return cwtypes.MetricAlarm{}
}
