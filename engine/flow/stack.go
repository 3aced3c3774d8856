package flow

// An actor's goroutine starts with a small stack and grows it by doubling
// as its calls go deeper (evaluating params, encoding its writes): each
// growth copies the stack and walks every frame on it to adjust its
// pointers. A foreach iteration starts two actors, whose stacks grew
// three or four times each, at about 5 % of the engine's CPU
// (docs/performance.md, "Big fan-out, fourth pass"). Reserving the room
// at the goroutine's first frame grows it once, with one frame to walk.
// The collector shrinks a stack that stays mostly unused, so an actor
// that then waits for long does not keep it.

// actorStackReserve is the stack an actor reserves when it starts.
const actorStackReserve = 12 << 10

// reserveStack grows the calling goroutine's stack to hold
// actorStackReserve bytes more than it uses, in one step. The index
// keeps the compiler from dropping the array.
//
//go:noinline
func reserveStack(i int) byte {
	var room [actorStackReserve]byte
	return room[i%actorStackReserve]
}
