package run

// SetRoundChunk sets the most runs one INSERT of a round carries, for a
// test, and returns what restores it.
func SetRoundChunk(n int) (restore func()) {
	old := roundChunk
	roundChunk = n
	return func() { roundChunk = old }
}
