package flowstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// An attempt that waited for a job reads the output params the job may
// have set through the API (PUT /api/v3/output-data) when the job is
// done. A burst of Http steps ends in bursts too, and each read on its
// own was a statement, a round trip and its allocations per step
// (docs/performance.md, "Side-effecting steps, fifth pass"): reads asked
// for while one is in flight wait for it and then go out together, as
// one statement. A lone read goes out at once.

// outputReads gathers concurrent reads of output data.
type outputReads struct {
	mu       sync.Mutex
	inflight bool // a reader goroutine runs
	waiting  []*outputRead
	// wake tells an idle reader that a read is waiting.
	wake chan struct{}
	// readers counts the reader goroutines started, for tests.
	readers int
}

// readerLinger is how long the reader goroutine waits for the next read
// before it ends: the reads of a burst are then answered by one
// goroutine, whose stack has grown for the statement once, rather than
// by a new one per statement, which grew its stack three or four times
// each (about 9 µs of CPU per Http step; docs/performance.md,
// "Side-effecting steps, eighth pass").
const readerLinger = 2 * time.Millisecond

// outputRead is one attempt's read: its result once done is closed.
type outputRead struct {
	uuid   string
	params []byte
	err    error
	done   chan struct{}
}

// outputReadTimeout bounds one statement of gathered reads; its callers'
// contexts bound their own waits.
const outputReadTimeout = 30 * time.Second

// maxOutputReads is the most reads one statement answers.
const maxOutputReads = 500

// readOutputsSQL returns the output params of the attempts $1 that have
// any, with the place (from 1) of each in $1.
const readOutputsSQL = `
SELECT u.i, d.params FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, i)
JOIN step_output_data d ON d.step_uuid = u.id`

// ReadOutputData returns the output params an external job set for an
// attempt through PUT /api/v3/output-data, nil when none.
func (s *Store) ReadOutputData(ctx context.Context, uuid string) ([]byte, error) {
	r := &outputRead{uuid: uuid, done: make(chan struct{})}
	s.outputs.mu.Lock()
	s.outputs.waiting = append(s.outputs.waiting, r)
	if !s.outputs.inflight {
		s.outputs.inflight = true
		if s.outputs.wake == nil {
			s.outputs.wake = make(chan struct{}, 1)
		}
		s.outputs.readers++
		go s.readOutputs()
	} else {
		select {
		case s.outputs.wake <- struct{}{}:
		default:
		}
	}
	s.outputs.mu.Unlock()
	select {
	case <-r.done:
		return r.params, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("read output data of step attempt %s: %w", uuid, ctx.Err())
	}
}

// readOutputs answers the reads waiting, a statement at a time, until
// none has come for readerLinger.
func (s *Store) readOutputs() {
	linger := time.NewTimer(readerLinger)
	defer linger.Stop()
	idle := false
	for {
		s.outputs.mu.Lock()
		batch := s.outputs.waiting
		if len(batch) > maxOutputReads {
			batch = batch[:maxOutputReads:maxOutputReads]
		}
		s.outputs.waiting = s.outputs.waiting[len(batch):]
		if len(batch) == 0 {
			if idle {
				s.outputs.inflight, s.outputs.waiting = false, nil
				s.outputs.mu.Unlock()
				return
			}
			s.outputs.mu.Unlock()
			// A read asked for from here on signals wake; one asked for
			// before is in waiting, read again below either way.
			linger.Reset(readerLinger)
			select {
			case <-s.outputs.wake:
			case <-linger.C:
				idle = true
			}
			continue
		}
		s.outputs.mu.Unlock()
		idle = false
		s.answerOutputReads(batch)
	}
}

// answerOutputReads reads the output data of batch in one statement.
func (s *Store) answerOutputReads(batch []*outputRead) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), outputReadTimeout)
	defer cancel()
	uuids := make([]string, len(batch))
	for i, r := range batch {
		uuids[i] = r.uuid
	}
	fail := func(err error) {
		for _, r := range batch {
			r.err = fmt.Errorf("read output data of step attempt %s: %w", r.uuid, err)
		}
	}
	rows, err := s.db.Query(ctx, readOutputsSQL, uuids)
	if err != nil {
		fail(err)
		return
	}
	found := make([][]byte, len(batch))
	for rows.Next() {
		var i int64
		var params []byte
		if err := rows.Scan(&i, &params); err != nil {
			rows.Close()
			fail(err)
			return
		}
		if i >= 1 && int(i) <= len(batch) {
			found[i-1] = params
		}
	}
	if err := rows.Err(); err != nil {
		fail(err)
		return
	}
	for i, r := range batch {
		r.params = found[i]
	}
}
