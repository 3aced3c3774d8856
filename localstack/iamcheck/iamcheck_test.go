package iamcheck

import (
	"slices"
	"testing"

	"github.com/maestro-aws/maestro/engine/awsconf"
)

const publisherPolicy = `{"Version":"2012-10-17","Statement":[
 {"Effect":"Allow","Action":"sns:Publish","Resource":["arn:aws:sns:us-east-1:1:events","arn:aws:sns:us-east-1:1:alerts"]},
 {"Effect":"Allow","Action":["sqs:ReceiveMessage","sqs:DeleteMessage","sqs:GetQueueAttributes","sqs:ChangeMessageVisibility"],"Resource":"arn:aws:sqs:us-east-1:1:internal"}]}`

var pollerAllowances = []Allowance{
	{"sqs:ReceiveMessage", "the event source mapping polls as the role"},
	{"sqs:DeleteMessage", "the event source mapping deletes what the function handled"},
	{"sqs:GetQueueAttributes", "the event source mapping reads the queue"},
	{"sqs:ChangeMessageVisibility", "the event source mapping returns failed messages"},
}

func publisher(t *testing.T, raw string) Principal {
	t.Helper()
	doc, err := ParseDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	return Principal{Name: "publisher", Policies: []Document{doc}, Allowances: pollerAllowances}
}

func TestCheck(t *testing.T) {
	publish := awsconf.Call{Principal: "publisher", Service: "SNS", Operation: "Publish"}
	for _, tc := range []struct {
		name   string
		policy string
		calls  []awsconf.Call
		want   []string
	}{
		{"every call granted, every grant used or allowed", publisherPolicy, []awsconf.Call{publish, publish}, nil},
		{"a grant removed: the call it served is a finding",
			`{"Statement":[{"Effect":"Allow","Action":["sqs:ReceiveMessage","sqs:DeleteMessage","sqs:GetQueueAttributes","sqs:ChangeMessageVisibility"],"Resource":"*"}]}`,
			[]awsconf.Call{publish}, []string{"publisher: sns:Publish: called, but no statement of its policies allows it"}},
		{"a grant no code uses is a finding",
			`{"Statement":[{"Effect":"Allow","Action":["sns:Publish","sns:Subscribe"],"Resource":"*"}]}`,
			[]awsconf.Call{publish}, []string{"publisher: sns:Subscribe: granted, but never called and on no allowance list"}},
		{"a wildcard grant covers the call and counts as used",
			`{"Statement":[{"Effect":"Allow","Action":"sns:Pub*","Resource":"*"}]}`,
			[]awsconf.Call{publish}, nil},
		{"a Deny statement grants nothing",
			`{"Statement":[{"Effect":"Deny","Action":"sns:Publish","Resource":"*"}]}`,
			[]awsconf.Call{publish}, []string{"publisher: sns:Publish: called, but no statement of its policies allows it"}},
		{"a call AWS refused is a finding even when the action is granted", publisherPolicy,
			[]awsconf.Call{{Principal: "publisher", Service: "SNS", Operation: "Publish", Error: "AuthorizationError"}, publish},
			[]string{"publisher: sns:Publish: refused by AWS (AuthorizationError)"}},
		{"a call by an unknown principal is a finding", publisherPolicy,
			[]awsconf.Call{publish, {Principal: "stranger", Service: "SQS", Operation: "SendMessage"}},
			[]string{"stranger: sqs:SendMessage: called by a principal with no known role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range Check(tc.calls, []Principal{publisher(t, tc.policy)}) {
				got = append(got, f.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestAction(t *testing.T) {
	for _, tc := range [][3]string{
		{"SQS", "SendMessage", "sqs:SendMessage"},
		{"SQS", "SendMessageBatch", "sqs:SendMessage"},
		{"Secrets Manager", "GetSecretValue", "secretsmanager:GetSecretValue"},
		{"S3", "ListObjectsV2", "s3:ListBucket"},
		{"Lambda", "Invoke", "lambda:InvokeFunction"},
		{"CloudWatch Logs", "PutLogEvents", "logs:PutLogEvents"},
	} {
		if got := Action(tc[0], tc[1]); got != tc[2] {
			t.Errorf("Action(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}
