package flow

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// A lone start's notification carries its run (run.StartNote): the engine
// starts it from there, without claiming the message and reading the run
// first, when it has the run's definition (its version's) by its sha256.
// The start's own write deletes the message (queue.AckSQL, fenced like the
// start), and its CREATED guard lets one start through however many
// deliveries there are: a network away, the start's first step is durable
// one round trip sooner (docs/performance.md, "Starts, fourth pass").

// notedStart hands a start message to handleStart from its note
// (queue.WorkerConfig.Noted): ok false when the note does not decode or
// names a definition this engine has not read, and the message is then
// claimed and its run read as usual (which keeps the definition here for
// the next start).
func (e *Engine) notedStart(m queue.Message) (queue.Message, bool) {
	var n run.StartNote
	if err := json.Unmarshal(m.Note, &n); err != nil || n.WorkflowID == "" || len(n.DefinitionSHA256) != sha256.Size {
		return m, false
	}
	def := e.versionDefs.get([sha256.Size]byte(n.DefinitionSHA256))
	if def == nil {
		return m, false
	}
	m.Payload, m.TraceContext = m.Note, n.Trace
	m.Read = flowstore.CreatedFromNote(n, def)
	return m, true
}

// versionDefinitions keeps the JSON of the definitions of the runs the
// engine has read by its sha256, for the starts made from their
// notification. It holds up to maxVersionDefinitionBytes of them and
// forgets them all when full (the next start of each reads it again).
type versionDefinitions struct {
	mu    sync.Mutex
	defs  map[[sha256.Size]byte][]byte
	bytes int
}

// maxVersionDefinitionBytes bounds versionDefinitions; a definition
// larger than an eighth of it is not kept.
const maxVersionDefinitionBytes = 16 << 20

func (v *versionDefinitions) get(sum [sha256.Size]byte) []byte {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.defs[sum]
}

// put keeps def, a definition as a read of its run returned it.
func (v *versionDefinitions) put(def []byte) {
	if len(def) == 0 || len(def) > maxVersionDefinitionBytes/8 {
		return
	}
	sum := sha256.Sum256(def)
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.defs[sum]; ok {
		return
	}
	if v.defs == nil || v.bytes+len(def) > maxVersionDefinitionBytes {
		v.defs, v.bytes = map[[sha256.Size]byte][]byte{}, 0
	}
	v.defs[sum] = def
	v.bytes += len(def)
}
