package flow

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// isPermanent reports errors that retrying cannot fix: constraint and
// trigger violations mean the write itself is wrong (for example a stale
// write the status guard refused).
func isPermanent(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "23", "22", "42", "40":
			return true
		}
	}
	return false
}
