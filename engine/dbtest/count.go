package dbtest

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/pgparam"
)

// Statements counts the statements a pool sends to PostgreSQL, each
// statement of a pgx.Batch included, BEGIN and COMMIT included: what a
// hot path costs in round trips and in pg_stat_statements calls. Tests
// assert on it (a count, unlike a time, does not move with the load of a
// shared machine) and benchmarks report it.
type Statements struct {
	mu    sync.Mutex
	total int64
	bySQL map[string]int64
	// spent is the time between each statement's start and end, by
	// statement (a batch's statements are not timed).
	spent map[string]time.Duration
	// rows are the rows each statement affected (its command tag).
	rows map[string]int64
}

type startKey struct{}

type started struct {
	sql string
	at  time.Time
}

// CountingPool is Pool with every statement counted in the returned
// Statements.
func CountingPool(t testing.TB) (*pgxpool.Pool, *Statements) {
	t.Helper()
	return CountingPoolOf(t, 0)
}

// CountingPoolOf is CountingPool with at most maxConns connections (0:
// pgx's default, max(4, cores)), e.g. the engine's own pool size.
func CountingPoolOf(t testing.TB, maxConns int32) (*pgxpool.Pool, *Statements) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL(t))
	if err != nil {
		t.Fatalf("dbtest: parse the pool config: %v", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	st := &Statements{bySQL: map[string]int64{}, spent: map[string]time.Duration{}, rows: map[string]int64{}}
	cfg.ConnConfig.Tracer = st
	cfg.AfterConnect = pgparam.AfterConnect(cfg.AfterConnect) // as dbconn.Open
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, st
}

func (s *Statements) add(sql string) string {
	key := strings.Join(strings.Fields(sql), " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total++
	s.bySQL[key]++
	return key
}

// TraceQueryStart counts a statement (pgx.QueryTracer).
func (s *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, startKey{}, started{sql: s.add(data.SQL), at: time.Now()})
}

// TraceQueryEnd adds the statement's time (pgx.QueryTracer).
func (s *Statements) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if st, ok := ctx.Value(startKey{}).(started); ok {
		s.mu.Lock()
		s.spent[st.sql] += time.Since(st.at)
		if data.Err == nil {
			s.rows[st.sql] += data.CommandTag.RowsAffected()
		}
		s.mu.Unlock()
	}
}

// TraceBatchStart does nothing; each query of the batch is counted by
// TraceBatchQuery (pgx.BatchTracer).
func (s *Statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery counts one statement of a batch (pgx.BatchTracer).
func (s *Statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	s.add(data.SQL)
}

// TraceBatchEnd does nothing (pgx.BatchTracer).
func (s *Statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Total is the number of statements counted so far.
func (s *Statements) Total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Count returns how many statements containing substr were sent, and
// the rows they affected.
func (s *Statements) Count(substr string) (calls, rows int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	substr = strings.Join(strings.Fields(substr), " ")
	for sql, n := range s.bySQL {
		if strings.Contains(sql, substr) {
			calls += n
			rows += s.rows[sql]
		}
	}
	return calls, rows
}

// Reset forgets every statement counted so far.
func (s *Statements) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total = 0
	clear(s.bySQL)
	clear(s.spent)
	clear(s.rows)
}

// Rows returns the rows each statement (its whitespace collapsed)
// affected since the last Reset, as its command tag said: an UPDATE's
// rows updated, a SELECT's rows returned.
func (s *Statements) Rows() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.rows)
}

// Spent returns the time spent in each statement (its whitespace
// collapsed) since the last Reset, from its start to its end as the
// client saw them: where a hot path's time goes.
func (s *Statements) Spent() map[string]time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.spent)
}

// BySQL returns the count of each statement (its whitespace collapsed),
// for a failure message that says which statements were sent.
func (s *Statements) BySQL() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.bySQL)
}
