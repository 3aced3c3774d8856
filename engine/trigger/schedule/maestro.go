package schedule

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Maestro derives a trigger's identity, its fuzzy delay and the request id
// of each of its starts from the Java toString of the trigger object
// (CronTimeTrigger(cron=..., timezone=...)); the same strings here give the
// same uuids, delays and request ids as Maestro's for the same definition.

// maestroKey is Maestro's toString of the trigger.
func maestroKey(t Trigger) string {
	tz := t.Timezone
	if tz == "" {
		tz = "null"
	}
	var b strings.Builder
	switch t.Kind {
	case KindCron:
		fmt.Fprintf(&b, "CronTimeTrigger(cron=%s, timezone=%s", t.Cron, tz)
	case KindPredefined:
		name := strings.ToUpper(strings.TrimPrefix(strings.TrimSpace(t.Expression), "@"))
		fmt.Fprintf(&b, "PredefinedTimeTrigger(expression=%s, timezone=%s", name, tz)
	default:
		start := t.Start
		if start == "" {
			start = "null"
		}
		fmt.Fprintf(&b, "IntervalTimeTrigger(interval=%s, start=%s", t.Interval, start)
	}
	if t.FuzzyText != "" {
		b.WriteString(", fuzzyMaxDelay=" + t.FuzzyText)
	}
	b.WriteString(")")
	return b.String()
}

// NameUUID is Java's UUID.nameUUIDFromBytes: an MD5 (version 3) uuid of the
// bytes alone, without a namespace.
func NameUUID(s string) uuid.UUID {
	sum := md5.Sum([]byte(s))
	sum[6] = sum[6]&0x0f | 0x30
	sum[8] = sum[8]&0x3f | 0x80
	return uuid.UUID(sum)
}

// SetUUID is Maestro's time trigger uuid of a workflow version: one uuid
// for its whole list of time triggers, given their keys in order. A TIME
// initiator carries it as trigger_uuid.
func SetUUID(keys []string) string {
	return NameUUID("[" + strings.Join(keys, ", ") + "]").String()
}

// RequestID is the request id of the start of a trigger's run at fire time
// (Maestro's: workflow id, trigger key and fire time in epoch seconds). A
// repeated start for the same fire time is a DUPLICATED start.
func RequestID(workflowID, key string, fire time.Time) string {
	return NameUUID(fmt.Sprintf("%s:%s:%d", workflowID, key, fire.Unix())).String()
}

// Delay is the trigger's fuzzy delay for a workflow: a deterministic offset
// in whole seconds within [0, FuzzyMaxDelay), as Maestro computes it
// (java.util.Random seeded with the low bits of a uuid of the trigger and
// the workflow id).
func (c *Compiled) Delay(workflowID string) time.Duration {
	bound := int32(min(c.FuzzyMaxDelay/time.Second, 1<<31-1))
	if bound <= 0 {
		return 0
	}
	u := NameUUID(c.key + workflowID)
	lsb := int64(binary.BigEndian.Uint64(u[8:]))
	return time.Duration(newJavaRandom(lsb).nextInt(bound)) * time.Second
}

// javaRandom is java.util.Random's linear congruential generator.
type javaRandom struct{ seed int64 }

const (
	javaMultiplier = 0x5DEECE66D
	javaMask       = 1<<48 - 1
)

func newJavaRandom(seed int64) *javaRandom {
	return &javaRandom{seed: (seed ^ javaMultiplier) & javaMask}
}

func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*javaMultiplier + 0xB) & javaMask
	return int32(uint64(r.seed) >> (48 - bits))
}

// nextInt is Random.nextInt(bound) for bound > 0.
func (r *javaRandom) nextInt(bound int32) int32 {
	if bound&-bound == bound {
		return int32((int64(bound) * int64(r.next(31))) >> 31)
	}
	for {
		bits := r.next(31)
		val := bits % bound
		if bits-val+(bound-1) >= 0 {
			return val
		}
	}
}
