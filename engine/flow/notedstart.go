package flow

import (
	"encoding/json"
	"sync"

	"github.com/maestro-aws/maestro/engine/flow/internal/flowstore"
	"github.com/maestro-aws/maestro/engine/queue"
	"github.com/maestro-aws/maestro/engine/run"
)

// A lone start's notification carries its run (run.StartNote): the engine
// starts it from there, without claiming the message and reading the run
// first, when it has the run's definition, its version's, by fingerprint.
// The start's own write deletes the message (queue.AckSQL, fenced like the
// start), and its CREATED guard lets one start through however many
// deliveries there are: a network away, the start's first step is durable
// one round trip sooner (docs/performance.md, "Starts, fourth pass").

// notedStart hands a start message to handleStart from its note
// (queue.WorkerConfig.Noted): ok false when the note does not decode or
// names a definition this engine has not read, and the message is then
// claimed and its run read as usual (which puts the definition here for
// the next start).
func (e *Engine) notedStart(m queue.Message) (queue.Message, bool) {
	var n run.StartNote
	if err := json.Unmarshal(m.Note, &n); err != nil || n.WorkflowID == "" || len(n.Fingerprint) == 0 {
		return m, false
	}
	def := e.versionDefs.get(n.Fingerprint)
	if def == nil {
		return m, false
	}
	m.Payload, m.TraceContext = m.Note, n.Trace
	m.Read = flowstore.CreatedFromNote(n, def)
	return m, true
}

// versionDefinitions keeps the JSON of version definitions by fingerprint,
// as the runs that use them store it, for the starts made from their
// notification. It holds up to maxVersionDefinitionBytes of them and
// forgets them all when full (the next start of each reads it again).
type versionDefinitions struct {
	mu    sync.Mutex
	defs  map[string][]byte
	bytes int
}

// maxVersionDefinitionBytes bounds versionDefinitions; a definition
// larger than an eighth of it is not kept.
const maxVersionDefinitionBytes = 16 << 20

func (v *versionDefinitions) get(fingerprint []byte) []byte {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.defs[string(fingerprint)]
}

// put keeps def under fingerprint.
func (v *versionDefinitions) put(fingerprint, def []byte) {
	if len(fingerprint) == 0 || len(def) == 0 || len(def) > maxVersionDefinitionBytes/8 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.defs[string(fingerprint)]; ok {
		return
	}
	if v.defs == nil || v.bytes+len(def) > maxVersionDefinitionBytes {
		v.defs, v.bytes = map[string][]byte{}, 0
	}
	v.defs[string(fingerprint)] = def
	v.bytes += len(def)
}
