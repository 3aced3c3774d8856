package flow

import "sync"

// mailbox is an unbounded FIFO an actor reads from. Senders never block, so
// actors that message each other cannot deadlock.
type mailbox[T any] struct {
	mu     sync.Mutex
	items  []T
	signal chan struct{}
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{signal: make(chan struct{}, 1)}
}

// send enqueues m and wakes the reader.
func (b *mailbox[T]) send(m T) {
	b.mu.Lock()
	b.items = append(b.items, m)
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

// ready is signalled when items may be waiting.
func (b *mailbox[T]) ready() <-chan struct{} { return b.signal }

// drain returns and removes everything queued.
func (b *mailbox[T]) drain() []T {
	b.mu.Lock()
	items := b.items
	b.items = nil
	b.mu.Unlock()
	return items
}
