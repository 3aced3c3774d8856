package flow

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
)

// isPermanent reports errors that retrying cannot fix: constraint and
// trigger violations mean the write itself is wrong (for example a stale
// write the status guard refused), and a write ordered after one that
// failed can never be written (the flow is rebuilt from the database).
func isPermanent(err error) bool {
	if errors.Is(err, flowstore.ErrPredecessorFailed) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "23", "22", "42", "40":
			return true
		}
	}
	return false
}

// errLeaseExpired stops step work on a node whose lease on the flow's group
// may have run out by its own clock.
var errLeaseExpired = errors.New("the flow group's lease may have expired on this node; step work stopped")

// errHandingOver stops step work in a group the node is handing over to
// another node; the flow goes on there.
var errHandingOver = errors.New("the flow group is being handed over to another node")
