package main

import (
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// nagSuppress records, on c and its children, that a cdk-nag rule's
// finding is accepted, with the reason. appliesTo, when given, narrows the
// suppression to findings matching these regular expressions (cdk-nag's
// "/^...$/" form), so that a new, different finding still fails.
func nagSuppress(c constructs.IConstruct, rule, reason string, appliesTo ...string) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(rule), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		list := make([]any, len(appliesTo))
		for i, re := range appliesTo {
			list[i] = &cdknag.RegexAppliesTo{Regex: jsii.String(re)}
		}
		s.AppliesTo = &list
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(true))
}
