package workflow

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalidVersionSelector reports a version selector that is not one
// of the accepted forms (definition.ErrInvalidSelector is this error).
var ErrInvalidVersionSelector = errors.New("invalid version selector")

// VersionSelector names a workflow version: a number N > 0, or one of the
// names active, latest and default.
type VersionSelector struct {
	N    int64
	Name string
}

// ParseVersionSelector reads a selector as the API takes it: a number
// n > 0, or active, latest or default ("" is default). Any other selector
// is ErrInvalidVersionSelector. It is a value function so a start, which
// resolves the version in its own statement under the workflow lock,
// needs no store to read it.
func ParseVersionSelector(s string) (VersionSelector, error) {
	switch s {
	case "latest", "active", "default":
		return VersionSelector{Name: s}, nil
	case "":
		return VersionSelector{Name: "default"}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return VersionSelector{}, fmt.Errorf("version %q is not active, latest, default or a positive number: %w", s, ErrInvalidVersionSelector)
	}
	return VersionSelector{N: n}, nil
}

// String renders the selector as ParseVersionSelector reads it.
func (v VersionSelector) String() string {
	if v.N > 0 {
		return strconv.FormatInt(v.N, 10)
	}
	return v.Name
}
