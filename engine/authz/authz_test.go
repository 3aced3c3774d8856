package authz_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/maestro-aws/maestro/engine/authz"
)

func TestMatches(t *testing.T) {
	t.Parallel()
	const role = "arn:aws:iam::123456789012:role/data-eng"
	cases := []struct {
		entry, caller string
		want          bool
	}{
		{"alice", "alice", true},
		{"alice", "Alice", false},
		{"alice", "", false},
		{"", "alice", false},
		{role, role, true},
		{role, "arn:aws:sts::123456789012:assumed-role/data-eng/alice", true},
		{"arn:aws:iam::123456789012:role/team/sub/data-eng", "arn:aws:sts::123456789012:assumed-role/data-eng/bob", true},
		{"arn:aws-cn:iam::123456789012:role/data-eng", "arn:aws-cn:sts::123456789012:assumed-role/data-eng/bob", true},
		// Another account, another role, a role whose name only starts alike.
		{role, "arn:aws:sts::999999999999:assumed-role/data-eng/alice", false},
		{role, "arn:aws:sts::123456789012:assumed-role/data-engineering/alice", false},
		{role, "arn:aws:sts::123456789012:assumed-role/data-eng/", false},
		{role, "arn:aws:iam::123456789012:user/data-eng", false},
		// A user ARN matches only itself.
		{"arn:aws:iam::123456789012:user/alice", "arn:aws:sts::123456789012:assumed-role/alice/x", false},
		{"data-eng", "arn:aws:sts::123456789012:assumed-role/data-eng/alice", false},
	}
	for _, c := range cases {
		if got := authz.Matches(c.entry, c.caller); got != c.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", c.entry, c.caller, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	p := authz.Policy{Admins: []string{"root", "arn:aws:iam::1:role/admins"}}
	owned := authz.Target{Kind: "workflow", ID: "wf", Exists: true, Owner: "alice"}
	unowned := authz.Target{Kind: "tag permit", ID: "t", Exists: true}
	fresh := authz.Target{Kind: "workflow", ID: "new"}
	shared := authz.Target{Kind: "workflow", ID: "wf", Exists: true, Owner: "alice", Operators: []string{"olivia", "arn:aws:iam::1:role/ops"}}
	cases := []struct {
		caller string
		role   authz.Role
		target authz.Target
		want   error
	}{
		{"", authz.Public, owned, nil},
		{"", authz.Reader, owned, authz.ErrUnauthenticated},
		{"", authz.Owner, fresh, authz.ErrUnauthenticated},
		{"bob", authz.Reader, owned, nil},
		{"alice", authz.Owner, owned, nil},
		{"bob", authz.Owner, owned, authz.ErrForbidden},
		{"root", authz.Owner, owned, nil},
		{"arn:aws:sts::1:assumed-role/admins/ops", authz.Owner, owned, nil},
		{"bob", authz.Owner, fresh, nil},
		{"bob", authz.Owner, unowned, authz.ErrForbidden},
		{"root", authz.Owner, unowned, nil},
		{"alice", authz.Admin, owned, authz.ErrForbidden},
		{"root", authz.Admin, owned, nil},
		// Operators act on runs only.
		{"olivia", authz.Operator, shared, nil},
		{"arn:aws:sts::1:assumed-role/ops/sam", authz.Operator, shared, nil},
		{"alice", authz.Operator, shared, nil},
		{"root", authz.Operator, shared, nil},
		{"bob", authz.Operator, shared, authz.ErrForbidden},
		{"olivia", authz.Owner, shared, authz.ErrForbidden},
		{"", authz.Operator, shared, authz.ErrUnauthenticated},
	}
	for _, c := range cases {
		err := p.Decide(c.caller, c.role, c.target)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("Decide(%q, %v, %+v) = %v, want %v", c.caller, c.role, c.target, err, c.want)
		}
	}
	err := p.Decide("bob", authz.Owner, owned)
	if !strings.Contains(err.Error(), "workflow wf is owned by alice") {
		t.Errorf("the refusal should say who owns what: %v", err)
	}
}

func TestCheckCaller(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"alice", "arn:aws:sts::1:assumed-role/r/s", strings.Repeat("a", authz.MaxCallerLength)} {
		if err := authz.CheckCaller(ok); err != nil {
			t.Errorf("CheckCaller(%.20q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "  ", "a\x00b", "a\nb", "\xff", strings.Repeat("a", authz.MaxCallerLength+1)} {
		if err := authz.CheckCaller(bad); err == nil {
			t.Errorf("CheckCaller(%.20q) accepted it", bad)
		}
	}
}

func TestCallerContext(t *testing.T) {
	t.Parallel()
	if got := authz.CallerFrom(context.Background()); got != "" {
		t.Fatalf("no caller = %q", got)
	}
	if got := authz.CallerFrom(authz.WithCaller(context.Background(), "alice")); got != "alice" {
		t.Fatalf("caller = %q", got)
	}
}
