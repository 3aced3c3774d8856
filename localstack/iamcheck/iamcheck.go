// Package iamcheck holds the AWS API calls a deployment made against the IAM
// policies it was deployed with, both ways: every call must be granted by
// its principal's policy, and every action a policy grants must have been
// called or be on a list of reasoned allowances (what AWS itself does as the
// role, such as a Lambda writing its logs or polling its queue).
//
// The calls come from engine/awsconf's recorder; the policies from the
// deployed roles (the end-to-end test reads them from the emulator's IAM).
// The emulator, run with AUTH=true, evaluates every call as well, resources
// and conditions included; this check adds what no evaluator can see: a
// grant the code never uses.
package iamcheck

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/maestro-aws/maestro/engine/awsconf"
)

// Statement is one statement of an IAM policy document.
type Statement struct {
	Effect   string      `json:"Effect"`
	Action   StringOrSet `json:"Action"`
	Resource StringOrSet `json:"Resource"`
}

// StringOrSet is an IAM field that is either one string or a list.
type StringOrSet []string

// UnmarshalJSON reads either form.
func (s *StringOrSet) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a string or a list of strings: %w", err)
	}
	*s = many
	return nil
}

// Document is an IAM policy document.
type Document struct {
	Statement []Statement `json:"Statement"`
}

// ParseDocument reads a policy document (IAM returns them URL-decoded JSON).
func ParseDocument(raw string) (Document, error) {
	var d Document
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return d, fmt.Errorf("policy document: %w", err)
	}
	return d, nil
}

// Allowance is an action a principal may be granted without its code
// calling it, with the reason.
type Allowance struct {
	// Action is an IAM action or pattern as the policy writes it.
	Action string
	// Reason says who uses the grant, if not our code.
	Reason string
}

// Finding is one thing the check found wrong.
type Finding struct {
	Principal string
	// Action is the IAM action concerned.
	Action string
	// Problem says what is wrong.
	Problem string
}

func (f Finding) String() string { return f.Principal + ": " + f.Action + ": " + f.Problem }

// Principal is what the check knows of one principal.
type Principal struct {
	// Name is the principal calls are recorded under.
	Name string
	// Policies are the documents of every policy its role has.
	Policies []Document
	// Allowances are grants it may hold without calling them.
	Allowances []Allowance
}

// Check holds calls against the principals' policies. A call by a principal
// not in principals is a finding (nothing can vouch for it); so is a call
// that AWS refused, a call no Allow statement grants, and an allowed action
// no call used and no allowance explains.
func Check(calls []awsconf.Call, principals []Principal) []Finding {
	var out []Finding
	byName := map[string]Principal{}
	for _, p := range principals {
		byName[p.Name] = p
	}
	used := map[string]map[string]bool{}
	seen := map[string]bool{}
	for _, c := range calls {
		action := Action(c.Service, c.Operation)
		key := c.Principal + "\x00" + action + "\x00" + c.Error
		if seen[key] {
			continue
		}
		seen[key] = true
		p, ok := byName[c.Principal]
		if !ok {
			out = append(out, Finding{c.Principal, action, "called by a principal with no known role"})
			continue
		}
		if strings.Contains(c.Error, "AccessDenied") || c.Error == "AuthorizationError" || c.Error == "UnauthorizedOperation" {
			out = append(out, Finding{p.Name, action, "refused by AWS (" + c.Error + ")"})
		}
		grant := matchingGrant(p.Policies, action)
		if grant == "" {
			out = append(out, Finding{p.Name, action, "called, but no statement of its policies allows it"})
			continue
		}
		if used[p.Name] == nil {
			used[p.Name] = map[string]bool{}
		}
		used[p.Name][grant] = true
	}
	for _, p := range principals {
		for _, grant := range granted(p.Policies) {
			if used[p.Name][grant] || allowed(p.Allowances, grant) {
				continue
			}
			out = append(out, Finding{p.Name, grant, "granted, but never called and on no allowance list"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// matchingGrant is the first allowed action pattern that covers action.
func matchingGrant(docs []Document, action string) string {
	for _, d := range docs {
		for _, st := range d.Statement {
			if st.Effect != "Allow" {
				continue
			}
			for _, a := range st.Action {
				if actionMatches(a, action) {
					return a
				}
			}
		}
	}
	return ""
}

// granted lists each allowed action pattern once.
func granted(docs []Document) []string {
	var out []string
	for _, d := range docs {
		for _, st := range d.Statement {
			if st.Effect != "Allow" {
				continue
			}
			for _, a := range st.Action {
				if !slices.Contains(out, a) {
					out = append(out, a)
				}
			}
		}
	}
	return out
}

func allowed(as []Allowance, grant string) bool {
	for _, a := range as {
		if strings.EqualFold(a.Action, grant) {
			return true
		}
	}
	return false
}

// actionMatches reports whether an IAM action pattern (with * and ?
// wildcards, case-insensitive as IAM compares actions) covers action.
func actionMatches(pattern, action string) bool {
	ok, err := path.Match(strings.ToLower(pattern), strings.ToLower(action))
	return err == nil && ok
}

// servicePrefix maps the SDK's service ids to IAM's action prefixes.
var servicePrefix = map[string]string{
	"SQS":             "sqs",
	"SNS":             "sns",
	"Secrets Manager": "secretsmanager",
	"Lambda":          "lambda",
	"ECS":             "ecs",
	"S3":              "s3",
	"CloudWatch":      "cloudwatch",
	"CloudWatch Logs": "logs",
	"Scheduler":       "scheduler",
	"STS":             "sts",
	"Athena":          "athena",
	"Glue":            "glue",
	"SFN":             "states",
	"Batch":           "batch",
	"EMR":             "elasticmapreduce",
}

// operationAction maps operations whose IAM action has another name.
var operationAction = map[string]string{
	"s3:ListObjectsV2":       "s3:ListBucket",
	"s3:HeadObject":          "s3:GetObject",
	"s3:HeadBucket":          "s3:ListBucket",
	"sns:PublishBatch":       "sns:Publish",
	"sqs:SendMessageBatch":   "sqs:SendMessage",
	"sqs:DeleteMessageBatch": "sqs:DeleteMessage",
	"lambda:Invoke":          "lambda:InvokeFunction",
}

// Action is the IAM action a call of operation on service needs.
func Action(service, operation string) string {
	prefix, ok := servicePrefix[service]
	if !ok {
		prefix = strings.ToLower(strings.ReplaceAll(service, " ", ""))
	}
	a := prefix + ":" + operation
	if mapped, ok := operationAction[a]; ok {
		return mapped
	}
	return a
}
