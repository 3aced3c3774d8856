package flow

import "sync"

// mailbox is an unbounded FIFO an actor reads from. Senders never block, so
// actors that message each other cannot deadlock.
type mailbox[T any] struct {
	mu     sync.Mutex
	items  []T
	signal chan struct{}
	// hook, set while the mailbox is frozen (its actor is leaving memory:
	// passivate.go), is called after every send.
	hook func()
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{signal: make(chan struct{}, 1)}
}

// send enqueues m and wakes the reader.
func (b *mailbox[T]) send(m T) {
	b.mu.Lock()
	b.items = append(b.items, m)
	hook := b.hook
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default:
	}
	if hook != nil {
		hook()
	}
}

// freeze makes every later send call hook once its item is queued.
func (b *mailbox[T]) freeze(hook func()) {
	b.mu.Lock()
	b.hook = hook
	b.mu.Unlock()
}

// thaw undoes freeze.
func (b *mailbox[T]) thaw() { b.freeze(nil) }

// pending reports whether items are queued.
func (b *mailbox[T]) pending() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.items) > 0
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
