package main

import (
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/maestro-aws/maestro/engine/metrics"
)

func TestArchiveStack(t *testing.T) {
	f := loadFixture(t)
	tmpl := f.archive
	fn := logicalID(t, tmpl.stack, "Archiver", "Function")
	bucket := logicalID(t, tmpl.stack, "Bucket")
	dlq := logicalID(t, tmpl.stack, "ScheduleDeadLetterQueue")
	role := logicalID(t, tmpl.stack, "ScheduleRole")

	t.Run("bucket private, encrypted, TLS only, tiered", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
				"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
					map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}}}},
				"PublicAccessBlockConfiguration": map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true,
					"IgnorePublicAcls": true, "RestrictPublicBuckets": true},
			})
		})
		policy := asJSON(tmpl.ofType("AWS::S3::BucketPolicy"))
		if !strings.Contains(policy, `"aws:SecureTransport":"false"`) {
			t.Errorf("bucket policy does not refuse plain HTTP: %s", policy)
		}
		if p := asJSON(props(tmpl.Resources[bucket])["LifecycleConfiguration"]); !strings.Contains(p, "GLACIER_IR") {
			t.Errorf("lifecycle %s", p)
		}
	})

	t.Run("hourly schedule with retries and a dead-letter queue", func(t *testing.T) {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), map[string]any{
				"ScheduleExpression": ArchiveSchedule,
				"State":              "ENABLED",
				"Target": map[string]any{
					"Arn":              map[string]any{"Fn::GetAtt": []any{fn, "Arn"}},
					"RoleArn":          map[string]any{"Fn::GetAtt": []any{role, "Arn"}},
					"RetryPolicy":      map[string]any{"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600},
					"DeadLetterConfig": map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}}},
				},
			})
		})
		grants := policyGrants(tmpl, role)
		if joined := strings.Join(grants, " "); !strings.Contains(joined, `"lambda:InvokeFunction"@{"Fn::GetAtt":["`+fn+`","Arn"]}`) || len(grants) != 2 {
			t.Errorf("schedule role grants %v", grants)
		}
	})

	t.Run("function: one at a time, the retention, writes objects under runs/ and nothing else of S3", func(t *testing.T) {
		checkFunctionBase(t, f, tmpl, "Archiver", 1)
		env := functionEnv(t, tmpl, "Archiver", "Function")
		if env["MAESTRO_RETENTION"] != "90d" || !strings.Contains(asJSON(env["MAESTRO_ARCHIVE_BUCKET"]), bucket) {
			t.Errorf("environment %s", asJSON(env))
		}
		if p := props(tmpl.Resources[fn]); p["Timeout"] != float64(ArchiveTimeoutSeconds) {
			t.Errorf("timeout %v", p["Timeout"])
		}
		var s3 []string
		for _, g := range policyGrants(tmpl, logicalID(t, tmpl.stack, "Archiver", "Role")) {
			if strings.Contains(g, "s3:") {
				s3 = append(s3, g)
			}
		}
		if len(s3) != 1 || !strings.HasPrefix(s3[0], `"s3:PutObject"@`) || !strings.Contains(s3[0], "/runs/*") {
			t.Errorf("archiver S3 grants %v, want s3:PutObject on runs/* only", s3)
		}
	})

	t.Run("the API reads archived runs, nothing else of the bucket", func(t *testing.T) {
		env := functionEnv(t, f.api, "Api", "Function")
		if !importsFrom(env["MAESTRO_ARCHIVE_BUCKET"], *tmpl.stack.StackName(), bucket) {
			t.Errorf("API environment %s lacks the archive bucket", asJSON(env))
		}
		var s3 []string
		for _, g := range policyGrants(f.api, logicalID(t, f.api.stack, "Api", "Role")) {
			if strings.Contains(g, "s3:") {
				s3 = append(s3, g)
			}
		}
		if len(s3) != 1 || !strings.HasPrefix(s3[0], `"s3:GetObject"@`) || !strings.Contains(s3[0], "/runs/*") {
			t.Errorf("API S3 grants %v, want s3:GetObject on runs/* only", s3)
		}
	})

	t.Run("alarms on failed passes and on lag, in the deployment's namespace", func(t *testing.T) {
		for id, metric := range map[string]string{"ArchiveFailures": metrics.ArchiveFailures, "ArchiveLag": metrics.ArchiveLag} {
			if _, ok := f.stacks.Monitoring.Alarms[id]; !ok {
				t.Fatalf("no %s alarm", id)
			}
			p := props(f.monitoring.Resources[logicalID(t, f.monitoring.stack, id)])
			if p["MetricName"] != metric || p["Namespace"] != metrics.Namespace ||
				!strings.Contains(asJSON(p["Dimensions"]), `"Value":"`+metrics.ServiceArchiver+`"`) {
				t.Errorf("%s alarm %s", id, asJSON(p))
			}
		}
		if !metrics.Emits(metrics.ServiceArchiver, metrics.ArchiveLag) || !metrics.Emits(metrics.ServiceArchiver, metrics.ArchiveFailures) {
			t.Error("the archiver's metrics are not in the catalog")
		}
	})
}
