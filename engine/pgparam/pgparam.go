// Package pgparam sizes pgx's parameter buffer once for a statement with
// large parameters.
//
// pgx encodes a statement's parameters into one buffer per connection,
// which it shrinks back to 256 bytes after every statement: a multi-row
// write whose column arrays come to hundreds of kilobytes (the node's
// writer, a foreach batch's run insert) regrows it by repeated appends,
// allocating, clearing and copying about five times what it ends up
// holding. Sized wraps a statement's first parameter with the size its
// parameters will take; on a connection whose type map has Register's
// plan, encoding it makes the buffer that size at once. On any other
// connection it encodes as the value it wraps (driver.Valuer), so a
// statement that uses it is correct whatever pool runs it.
//
// The messages themselves go through a second buffer, the connection's
// write buffer, which pgx likewise shrinks to a kilobyte after every
// flush: Reserve gives it the room a batch of statements will take before
// the batch is sent.
package pgparam

import (
	"context"
	"database/sql/driver"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// Hint is a parameter of type T that also carries the size, in bytes,
// that the statement's parameters take encoded. It is generic so that pgx,
// which keeps one encode plan per OID and Go type, plans the value under
// it by its own type.
type Hint[T any] struct {
	// V is the parameter's value; Bytes the size hint.
	V     T
	Bytes int
}

// Value implements driver.Valuer: without Register's plan the hint is V.
func (h Hint[T]) Value() (driver.Value, error) { return h.V, nil }

func (h Hint[T]) hinted() (any, int) { return h.V, h.Bytes }

// hinter is every Hint.
type hinter interface{ hinted() (any, int) }

// Sized wraps args[0], a T, in a Hint of the size Estimate gives for args.
// It does nothing when args is empty or args[0] is not a T.
func Sized[T any](args []any) {
	if len(args) == 0 {
		return
	}
	if v, ok := args[0].(T); ok {
		args[0] = Hint[T]{V: v, Bytes: Estimate(args)}
	}
}

// Estimate is the size args take in pgx's binary encoding, about: the
// bytes of every string and []byte (an array element's length word
// included) and eight bytes per other element.
func Estimate(args []any) int {
	n := 0
	for _, a := range args {
		switch v := a.(type) {
		case [][]byte:
			for _, b := range v {
				n += len(b) + 5
			}
		case pgtype.FlatArray[[]byte]:
			for _, b := range v {
				n += len(b) + 5
			}
		case []string:
			for _, s := range v {
				n += len(s) + 4
			}
		case []byte:
			n += len(v)
		case string:
			n += len(v)
		case []int64:
			n += 12 * len(v)
		case []int32:
			n += 8 * len(v)
		case []bool:
			n += 5 * len(v)
		default:
			n += 8
		}
		n += 24 // an array's header
	}
	return n
}

// Register adds the encode plan of Hint to m, ahead of pgx's own wrappers.
func Register(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapHint}, m.TryWrapEncodePlanFuncs...)
}

// AfterConnect registers Hint's plan on a new connection, then calls next
// (nil: none): a pgxpool.Config.AfterConnect.
func AfterConnect(next func(context.Context, *pgx.Conn) error) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, c *pgx.Conn) error {
		Register(c.TypeMap())
		if next != nil {
			return next(ctx, c)
		}
		return nil
	}
}

func tryWrapHint(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	h, ok := value.(hinter)
	if !ok {
		return nil, nil, false
	}
	v, _ := h.hinted()
	return &hintPlan{}, v, true
}

// maxHint caps the room made at once: a wrong estimate must not allocate
// without bound.
const maxHint = 64 << 20

type hintPlan struct{ next pgtype.EncodePlan }

func (p *hintPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *hintPlan) Encode(value any, buf []byte) ([]byte, error) {
	v, n := value.(hinter).hinted()
	if need := len(buf) + min(n, maxHint); cap(buf) < need {
		grown := make([]byte, len(buf), need)
		copy(grown, buf)
		buf = grown
	}
	return p.next.Encode(v, buf)
}

// Reserve makes room for n bytes in the buffer conn writes its next
// messages from, when it has less: a batch of statements whose Bind
// messages come to hundreds of kilobytes is then encoded into one
// allocation, where pgx's buffer, which it shrinks back to a kilobyte
// after every flush, would regrow by repeated appends. It writes nothing:
// the message it sends encodes to no bytes. conn must be idle (acquired,
// nothing of it in flight), as before a SendBatch.
func Reserve(conn *pgconn.PgConn, n int) {
	if n <= 0 {
		return
	}
	conn.Frontend().Send(room(min(n, maxHint)))
}

// room is a frontend message of no bytes that leaves the buffer it is
// encoded into with at least that many bytes free.
type room int

// Frontend implements pgproto3.FrontendMessage.
func (room) Frontend() {}

// Decode implements pgproto3.Message; a room is never received.
func (room) Decode([]byte) error { return errors.New("pgparam: room is not a protocol message") }

// Encode implements pgproto3.Message: dst, with room to grow.
func (r room) Encode(dst []byte) ([]byte, error) {
	if cap(dst)-len(dst) >= int(r) {
		return dst, nil
	}
	grown := make([]byte, len(dst), len(dst)+int(r))
	copy(grown, dst)
	return grown, nil
}

var _ pgproto3.FrontendMessage = room(0)
