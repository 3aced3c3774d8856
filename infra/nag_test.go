package main

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestCdkNag applies cdk-nag's AwsSolutions and ServerlessChecks packs to
// the app as cdk.json configures it and to the app with every context value
// set (the fixtures add the checks before synth), and fails on any error or
// warning that is not suppressed with a reason in the stacks.
func TestCdkNag(t *testing.T) {
	for _, f := range []*fixture{loadFixture(t), loadAllContextFixture(t)} {
		for _, s := range f.all() {
			stack := s.stack
			t.Run(*stack.StackName(), func(t *testing.T) {
				ann := assertions.Annotations_FromStack(stack)
				rule := assertions.Match_StringLikeRegexp(jsii.String("(AwsSolutions|Serverless)-.*"))
				found := append(*ann.FindError(jsii.String("*"), rule), *ann.FindWarning(jsii.String("*"), rule)...)
				for _, m := range found {
					// id (the construct path) and the rule's message.
					t.Errorf("%.600s", asJSON(m))
				}
			})
		}
	}
}
