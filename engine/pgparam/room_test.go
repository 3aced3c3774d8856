package pgparam

import "testing"

// A room encodes to no bytes and leaves its buffer with the room asked
// for, without moving a buffer that has it already.
func TestRoomGrowsTheBufferOnly(t *testing.T) {
	dst := append(make([]byte, 0, 8), 'x', 'y')
	out, err := room(1000).Encode(dst)
	if err != nil || string(out) != "xy" || cap(out)-len(out) < 1000 {
		t.Fatalf("room(1000) on %q: %q, cap %d, %v", dst, out, cap(out), err)
	}
	again, _ := room(10).Encode(out)
	if &again[0] != &out[0] {
		t.Fatal("room(10) moved a buffer that had the room")
	}
	if err := room(1).Decode(nil); err == nil {
		t.Fatal("a room decoded")
	}
}
