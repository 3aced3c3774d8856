package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/maestro-aws/maestro/engine/wire"
)

// Maestro's pagination (its PaginationHelper): a page is `first` items
// going to older ids (forward) or `last` items going to newer ones
// (backward) from a cursor, which is an id; without a cursor a forward
// page starts at the newest id and a backward one at the oldest. Pages
// hold the elements newest first. Ids (instance ids, run ids, version
// numbers) are dense, so a page is an id range.

// maxPaginationLimit is the largest first or last Maestro allows.
const maxPaginationLimit = 200

// pagination is a parsed first/last/cursor request.
type pagination struct {
	forward bool
	limit   int64
	cursor  int64 // 0: none
}

// parsePagination reads first, last and cursor. Maestro requires one of
// first and last; without either this API pages forward by the limit
// parameter (default 20), so its own clients' limit and cursor work too.
func parsePagination(r *http.Request, max int64) (pagination, error) {
	q := r.URL.Query()
	first, last := q.Get("first"), q.Get("last")
	p := pagination{forward: true, limit: 20}
	num := func(name, v string) (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > max {
			return 0, badRequest(fmt.Sprintf("%s must be a number from 1 to %d, got %q", name, max, v))
		}
		return n, nil
	}
	var err error
	switch {
	case first != "" && last != "":
		return p, badRequest("Either first or last need to be provided, but not both")
	case first != "":
		p.limit, err = num("first", first)
	case last != "":
		p.forward = false
		p.limit, err = num("last", last)
	case q.Get("limit") != "":
		p.limit, err = num("limit", q.Get("limit"))
	}
	if err != nil {
		return p, err
	}
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 0 {
			return p, badRequest("cursor must be an id from an earlier page's page_info, got " + strconv.Quote(c))
		}
		p.cursor = n
	}
	return p, nil
}

// rangeOf returns the ids [low, high] the page covers among earliest to
// latest (Maestro's PaginationHelper.getPaginationRange).
func (p pagination) rangeOf(earliest, latest int64) (low, high int64) {
	switch {
	case p.forward && p.cursor == 0:
		high = latest
		low = max(earliest, high+1-p.limit)
	case p.forward:
		high = p.cursor - 1
		low = max(earliest, high+1-p.limit)
	case p.cursor == 0:
		low = earliest
		high = min(latest, low-1+p.limit)
	default:
		low = p.cursor + 1
		high = min(latest, low-1+p.limit)
	}
	if low > high {
		low = high
	}
	return low, high
}

// pageOf builds Maestro's PaginationResult of elements (newest first)
// among ids earliest to latest; idOf gives an element's id.
func pageOf[T any](elements []T, earliest, latest int64, idOf func(T) int64) wire.PaginationResult[T] {
	if len(elements) == 0 {
		out := emptyPage[T]()
		out.TotalCount = latest
		return out
	}
	high, low := idOf(elements[0]), idOf(elements[len(elements)-1])
	start, end := strconv.FormatInt(high, 10), strconv.FormatInt(low, 10)
	index := latest + 1 - high
	return wire.PaginationResult[T]{
		PageInfo: wire.PageInfo{StartCursor: &start, EndCursor: &end, HasPreviousPage: high < latest,
			HasNextPage: low > earliest, StartIndex: &index},
		TotalCount: latest - earliest + 1,
		Elements:   elements,
	}
}

// emptyPage is a PaginationResult with no elements.
func emptyPage[T any]() wire.PaginationResult[T] {
	return wire.PaginationResult[T]{Elements: []T{}}
}
