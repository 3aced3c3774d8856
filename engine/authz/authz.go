// Package authz decides who may do what through the REST API
// (docs/security.md). It knows callers, roles and principals; it does not
// know routes or storage: the API layer maps each route to the role it
// needs and looks up the owner of the resource it acts on.
//
// The model follows Maestro: a workflow has one owner (properties.owner,
// else the caller who created it); administrators come from configuration.
// Reading is open to every authenticated caller; changing a workflow or
// acting on its runs needs its owner or an administrator.
package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Role is what a caller must be to perform an action.
type Role int

// Roles, weakest first.
const (
	// Public actions need no identity (health, the OpenAPI document).
	Public Role = iota
	// Reader actions are open to every authenticated caller: all reads,
	// validating a definition, creating a workflow that does not exist yet,
	// announcing signals.
	Reader
	// Operator actions act on a workflow's runs (start, stop, kill,
	// restart, unblock, step actions, breakpoints): they need its owner,
	// an administrator, or one of the operators its properties name
	// (access_control.operators), who may not change the workflow itself.
	Operator
	// Owner actions change a resource or act on it: they need the owner of
	// the resource (for a workflow: properties.owner, else its creator) or
	// an administrator. A resource that does not exist yet has no owner:
	// creating it is a Reader action, and the creator becomes its owner.
	Owner
	// Admin actions need an administrator.
	Admin
)

// String names the role as docs/security.md does.
func (r Role) String() string {
	switch r {
	case Public:
		return "public"
	case Reader:
		return "reader"
	case Owner:
		return "owner"
	case Admin:
		return "admin"
	case Operator:
		return "operator"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// Errors Decide returns; the API maps them to 401 and 403.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// MaxCallerLength bounds a caller identity in bytes. IAM ARNs are at most
// 2,048 characters.
const MaxCallerLength = 2048

// CheckCaller reports whether name can be a caller identity: non-empty
// (after trimming), at most MaxCallerLength bytes, valid UTF-8 without
// control characters.
func CheckCaller(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return errors.New("the caller identity is empty")
	case len(name) > MaxCallerLength:
		return fmt.Errorf("the caller identity is %d bytes long; the limit is %d", len(name), MaxCallerLength)
	case !utf8.ValidString(name):
		return errors.New("the caller identity is not valid UTF-8")
	case strings.ContainsFunc(name, unicode.IsControl):
		return errors.New("the caller identity contains a control character")
	}
	return nil
}

// ParsePrincipals reads a list of principals separated by commas or white
// space, as MAESTRO_ADMINS holds them.
func ParsePrincipals(s string) []string {
	return strings.Fields(strings.ReplaceAll(s, ",", " "))
}

// Policy holds the configured administrators.
type Policy struct {
	// Admins may do everything. Entries are principals as Matches reads
	// them.
	Admins []string
}

// IsAdmin reports whether caller is an administrator.
func (p Policy) IsAdmin(caller string) bool {
	return caller != "" && slices.ContainsFunc(p.Admins, func(a string) bool { return Matches(a, caller) })
}

// Target is the resource an Owner action acts on.
type Target struct {
	// Kind and ID name it in messages ("workflow", "wf1").
	Kind, ID string
	// Exists is false for a resource the action would create.
	Exists bool
	// Owner is its owner's principal ("" for none: administrators only).
	Owner string
	// Operators are principals who may also perform Operator actions on it.
	Operators []string
}

// Decide reports whether caller may perform an action that needs role on
// target (target matters for Owner only). It returns nil, or an error that
// says why and ends in ErrUnauthenticated or ErrForbidden.
func (p Policy) Decide(caller string, role Role, target Target) error {
	if role == Public {
		return nil
	}
	if caller == "" {
		return fmt.Errorf("this action needs an authenticated caller: %w", ErrUnauthenticated)
	}
	switch role {
	case Reader:
		return nil
	case Owner, Operator:
		if !target.Exists || p.IsAdmin(caller) || (target.Owner != "" && Matches(target.Owner, caller)) {
			return nil
		}
		if role == Operator && slices.ContainsFunc(target.Operators, func(o string) bool { return Matches(o, caller) }) {
			return nil
		}
		owner := target.Owner
		if owner == "" {
			owner = "nobody"
		}
		return fmt.Errorf("%s %s is owned by %s; only its owner or an administrator may do this: %w",
			target.Kind, target.ID, owner, ErrForbidden)
	case Admin:
		if p.IsAdmin(caller) {
			return nil
		}
		return fmt.Errorf("only an administrator may do this: %w", ErrForbidden)
	}
	return fmt.Errorf("unknown role %v: %w", role, ErrForbidden)
}

// Matches reports whether the principal entry (an owner or an
// administrator as written in properties or configuration) names caller.
// Names match exactly. An IAM role ARN also matches every session of that
// role, as API Gateway reports callers that assumed it:
//
//	arn:aws:iam::123456789012:role/path/data-eng
//	matches arn:aws:sts::123456789012:assumed-role/data-eng/alice
func Matches(entry, caller string) bool {
	if entry == "" || caller == "" {
		return false
	}
	if entry == caller {
		return true
	}
	account, role, ok := iamRole(entry)
	if !ok {
		return false
	}
	rest, ok := strings.CutPrefix(caller, "arn:")
	if !ok {
		return false
	}
	// partition:sts::account:assumed-role/role/session
	parts := strings.SplitN(rest, ":", 5)
	if len(parts) != 5 || parts[1] != "sts" || parts[3] != account {
		return false
	}
	assumed, ok := strings.CutPrefix(parts[4], "assumed-role/")
	if !ok {
		return false
	}
	name, session, ok := strings.Cut(assumed, "/")
	return ok && session != "" && name == role
}

// iamRole splits an IAM role ARN (arn:partition:iam::account:role/path/name)
// into its account and role name.
func iamRole(arn string) (account, role string, ok bool) {
	rest, ok := strings.CutPrefix(arn, "arn:")
	if !ok {
		return "", "", false
	}
	parts := strings.SplitN(rest, ":", 5)
	if len(parts) != 5 || parts[1] != "iam" || parts[3] == "" {
		return "", "", false
	}
	path, ok := strings.CutPrefix(parts[4], "role/")
	if !ok || path == "" {
		return "", "", false
	}
	return parts[3], path[strings.LastIndexByte(path, '/')+1:], true
}

type callerKey struct{}

// WithCaller records who is calling: the IAM principal behind API Gateway,
// the `user` header in maestro dev.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFrom returns the caller recorded by WithCaller, or "".
func CallerFrom(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}
