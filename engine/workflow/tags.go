package workflow

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// Tag labels a workflow, step or parameter. In JSON it is a bare name ("etl") or an object
// {"name": ..., "namespace": ..., "permit": ...}; other fields of the object are kept as
// attributes, as Maestro does.
type Tag struct {
	Name      string                     `json:"name"`
	Namespace TagNamespace               `json:"namespace,omitzero"`
	Permit    *int64                     `json:"permit,omitzero"`
	Attrs     map[string]json.RawMessage `json:"-" wf:"extra"`
	short     bool                       // written as a bare string
}

// Tags is a list of tags; names must be unique.
type Tags []Tag

// NewTag returns a tag written as a bare name.
func NewTag(name string) Tag { return Tag{Name: name, short: true} }

// Names returns the tag names in order.
func (ts Tags) Names() []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// MarshalJSON writes a bare name when the tag was given as one and carries nothing else.
func (t Tag) MarshalJSON() ([]byte, error) {
	if t.short && t.Namespace == "" && t.Permit == nil && len(t.Attrs) == 0 {
		return appendJSONString(nil, t.Name), nil
	}
	type plain Tag
	return marshalWithExtra(plain(t), t.Attrs)
}

// UnmarshalJSON reads a bare name or a tag object, keeping the object's
// other fields as attributes, as in a definition: a job template's tags
// are decoded with encoding/json (Maestro's sample-job-template-1.json has a
// tag with a field of its own).
func (t *Tag) UnmarshalJSON(data []byte) error { return decodeStrict(data, t, "") }

func (t *Tag) bindNode(b *binder, n *node, path string) {
	switch n.kind {
	case kindString:
		*t = NewTag(n.text)
	case kindObject:
		type plain Tag
		var p plain
		b.bindStruct(n, reflectValueOf(&p), path)
		*t = Tag(p)
	default:
		b.addf(path, "expected a tag name or a tag object, got %s%s", n.kind, n.pos())
	}
}

// marshalWithExtra encodes v (a struct) and appends the extra fields, sorted by key, to the
// object.
func marshalWithExtra(v any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := marshalNoEscape(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	out := b[:len(b)-1] // drop '}'
	first := len(out) == 1
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendJSONString(out, k)
		out = append(out, ':')
		raw := extra[k]
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		out = append(out, raw...)
	}
	return append(out, '}'), nil
}

// marshalNoEscape encodes v compactly without escaping <, > and &, which SEL conditions use.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// CheckTags checks tags given outside a definition (a start request's
// runtime_tags) as a definition's tags are checked; field names them in
// the problems.
func CheckTags(ts Tags, field string) error {
	s := Validator{}.start()
	s.tags(ts, rootLoc(field))
	return s.err()
}

// MergeTags is Maestro's TagList merge: base's tags, each replaced by the
// tag of the same name in more, then the tags of more whose names base does
// not have, in order.
func MergeTags(base, more Tags) Tags {
	if len(more) == 0 {
		return base
	}
	byName := make(map[string]int, len(base))
	out := make(Tags, 0, len(base)+len(more))
	for _, t := range base {
		byName[t.Name] = len(out)
		out = append(out, t)
	}
	for _, t := range more {
		if i, ok := byName[t.Name]; ok {
			out[i] = t
			continue
		}
		byName[t.Name] = len(out)
		out = append(out, t)
	}
	return out
}
