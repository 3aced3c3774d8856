package instance

import "hash/fnv"

// GroupFor is the flow group of a run: a stable function of the instance's
// identity and the group count it was created with. Children are given
// their parent's count, so a parent can always compute a child's group.
func GroupFor(workflowID string, instanceID int64, groupCount int32) int32 {
	h := fnv.New32a()
	h.Write([]byte(workflowID))
	var b [8]byte
	for i := range 8 {
		b[i] = byte(instanceID >> (8 * i))
	}
	h.Write(b[:])
	return int32(h.Sum32() % uint32(groupCount))
}
