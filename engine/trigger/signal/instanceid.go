package signal

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/maestro-aws/maestro/engine/trigger/schedule"
)

// InstanceID is the request's signal instance id, as Maestro computes it:
// the request id when there is one, else the name-based uuid of the
// announcement's name and params (sorted by name) with the request time
// cleared, written as Maestro's JSON writes a SignalCreateRequest. Two
// announcements of the same name and params without a request id are thus
// one signal instance, as in Maestro; a request id makes each distinct.
// The params must have been normalised by Check (strings and int64s).
func (r *Request) InstanceID() string {
	if r.RequestID != "" {
		return r.RequestID
	}
	var b strings.Builder
	b.WriteString(`{"name":`)
	writeJSONString(&b, r.Name)
	if len(r.Params) > 0 {
		b.WriteString(`,"params":{`)
		keys := make([]string, 0, len(r.Params))
		for k := range r.Params {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			switch v := r.Params[k].(type) {
			case int64:
				b.WriteString(strconv.FormatInt(v, 10))
			case string:
				writeJSONString(&b, v)
			}
		}
		b.WriteByte('}')
	}
	b.WriteString(`,"request_time":0}`)
	return schedule.NameUUID(b.String()).String()
}

// writeJSONString writes s as Jackson writes a JSON string: quotes,
// backslashes and control characters escaped (\uXXXX in upper-case hex
// where JSON has no short form), everything else as is.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}
