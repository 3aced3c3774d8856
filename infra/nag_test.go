package main

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
)

// TestCdkNag applies cdk-nag's AwsSolutions pack to the app as cdk.json
// configures it (loadFixture adds the checks before synth) and fails on any
// error or warning that is not suppressed with a reason in the stacks.
func TestCdkNag(t *testing.T) {
	f := loadFixture(t)
	for _, s := range f.all() {
		stack := s.stack
		t.Run(*stack.StackName(), func(t *testing.T) {
			ann := assertions.Annotations_FromStack(stack)
			for _, find := range []func() *[]*cxapi.SynthesisMessage{
				func() *[]*cxapi.SynthesisMessage {
					return ann.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
				},
				func() *[]*cxapi.SynthesisMessage {
					return ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
				},
			} {
				for _, m := range *find() {
					t.Errorf("%s: %v", *m.Id, strings.SplitN(asJSON(m.Entry.Data), `\n`, 2)[0])
				}
			}
		})
	}
}
