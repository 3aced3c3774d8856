package workflow

import (
	"bytes"
	"encoding/json"
)

// DecodeJSON decodes a Maestro workflow definition ({"properties", "workflow", "is_active"})
// strictly: malformed JSON is reported as one Problem with its line, column, byte offset and the
// path being read; otherwise every unknown field, duplicate field and value of the wrong JSON
// type anywhere in the document is reported with its path. Errors are *ValidationError.
//
// Decoding checks shape only; call Validator.Validate for the rules. Enum values are matched
// case-insensitively and stored in their canonical spelling, as Maestro does. Fields that a
// typed step's type defines for itself are kept in Step.Config and checked by the validator.
func DecodeJSON(data []byte) (*Definition, error) {
	type plain Definition
	var d plain
	if err := decodeStrict(data, &d, ""); err != nil {
		return nil, err
	}
	out := Definition(d)
	return &out, nil
}

// DecodeProperties decodes a properties change set strictly, like DecodeJSON.
func DecodeProperties(data []byte) (*Properties, error) {
	var p Properties
	if err := decodeStrict(data, &p, ""); err != nil {
		return nil, err
	}
	return &p, nil
}

// MarshalIndent renders the definition as indented JSON without HTML escaping, for people.
func (d *Definition) MarshalIndent() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Canonical returns the deterministic JSON of the versioned part of the definition (the
// workflow), used to tell whether a new version changes anything: compact, keys sorted at every
// level, no HTML escaping, and no defaults filled in, so the user's intent is kept as written.
// Properties and is_active are not part of a workflow version and are left out; use
// Properties.Canonical for them.
func (d *Definition) Canonical() ([]byte, error) {
	return canonicalJSON(map[string]any{"workflow": &d.Workflow})
}

// Canonical returns the deterministic JSON of the properties, like Definition.Canonical.
func (p *Properties) Canonical() ([]byte, error) { return canonicalJSON(p) }

// CanonicalJSON returns raw with every object's keys sorted, compact and
// without HTML escaping.
func CanonicalJSON(raw json.RawMessage) ([]byte, error) { return canonicalJSON(raw) }

// canonicalJSON encodes v, then re-encodes it through generic maps so that every object's keys
// are sorted.
func canonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
