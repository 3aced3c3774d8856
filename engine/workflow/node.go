package workflow

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// nodeKind is the JSON type of a node.
type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k nodeKind) String() string {
	switch k {
	case kindBool:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	case kindObject:
		return "object"
	}
	return "null"
}

// node is a parsed JSON (or YAML) value that keeps object key order, so the strict binder can
// report every unknown or mistyped field with its path, and opaque blocks round-trip unchanged.
type node struct {
	kind  nodeKind
	text  string // string value, or the literal text of a number
	b     bool
	items []*node
	keys  []string
	vals  []*node
	line  int // 1-based source position when known (YAML), else 0
	col   int
}

// get returns the value of key in an object node, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// pos renders the source position for messages, or "" when unknown.
func (n *node) pos() string {
	if n == nil || n.line == 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d, column %d)", n.line, n.col)
}

// toAny converts a node to plain Go values: string, json.Number, bool, []any, map[string]any.
func (n *node) toAny() any {
	if n == nil {
		return nil
	}
	switch n.kind {
	case kindBool:
		return n.b
	case kindNumber:
		return json.Number(n.text)
	case kindString:
		return n.text
	case kindArray:
		out := make([]any, len(n.items))
		for i, it := range n.items {
			out[i] = it.toAny()
		}
		return out
	case kindObject:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			out[k] = n.vals[i].toAny()
		}
		return out
	}
	return nil
}

// appendJSON writes the node as compact JSON, keeping key order.
func (n *node) appendJSON(buf []byte) []byte {
	if n == nil {
		return append(buf, "null"...)
	}
	switch n.kind {
	case kindBool:
		return strconv.AppendBool(buf, n.b)
	case kindNumber:
		return append(buf, n.text...)
	case kindString:
		return appendJSONString(buf, n.text)
	case kindArray:
		buf = append(buf, '[')
		for i, it := range n.items {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = it.appendJSON(buf)
		}
		return append(buf, ']')
	case kindObject:
		buf = append(buf, '{')
		for i, k := range n.keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			buf = n.vals[i].appendJSON(buf)
		}
		return append(buf, '}')
	}
	return append(buf, "null"...)
}

func (n *node) rawJSON() json.RawMessage { return n.appendJSON(nil) }

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as a JSON string without HTML escaping.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\r':
				buf = append(buf, '\\', 'r')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				buf = append(buf, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, `\ufffd`...)
		} else {
			buf = append(buf, s[i:i+size]...)
		}
		i += size
	}
	return append(buf, '"')
}

// maxNesting bounds how deep a document may nest, so hostile input cannot exhaust the stack.
const maxNesting = 256

// jsonParser turns JSON text into a node tree, reporting the first syntax error with its
// line, column and the path being parsed, and every duplicate object key.
type jsonParser struct {
	data  []byte
	pos   int
	depth int
	dups  problems
}

// syntaxError is a malformed-JSON finding; parsing stops at the first one.
type syntaxError struct {
	path string
	msg  string
}

func (e *syntaxError) Error() string { return e.msg }

// parseJSON parses one JSON document.
func parseJSON(data []byte) (*node, []Problem) {
	p := &jsonParser{data: data}
	p.skipSpace()
	if p.pos == len(p.data) {
		return nil, []Problem{{Message: "malformed JSON: empty document"}}
	}
	n, err := p.value("")
	if err == nil {
		p.skipSpace()
		if p.pos < len(p.data) {
			err = p.fail("", "unexpected data after the top-level value")
		}
	}
	if err != nil {
		se := err.(*syntaxError)
		return nil, []Problem{{Path: se.path, Message: se.msg}}
	}
	return n, p.dups.list
}

func (p *jsonParser) fail(path, what string) error {
	line, col := 1, 1
	end := min(p.pos, len(p.data))
	for i := 0; i < end; i++ {
		if p.data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &syntaxError{path: path, msg: fmt.Sprintf("malformed JSON at line %d, column %d (offset %d): %s", line, col, p.pos, what)}
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) describe() string {
	if p.pos >= len(p.data) {
		return "unexpected end of input"
	}
	r, _ := utf8.DecodeRune(p.data[p.pos:])
	return fmt.Sprintf("unexpected character %q", r)
}

func (p *jsonParser) value(path string) (*node, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return nil, p.fail(path, "unexpected end of input, expected a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(path)
	case c == '[':
		return p.array(path)
	case c == '"':
		s, err := p.str(path)
		if err != nil {
			return nil, err
		}
		return &node{kind: kindString, text: s}, nil
	case c == '-' || isDigit(c):
		return p.number(path)
	case c == 't':
		return p.literal(path, "true", &node{kind: kindBool, b: true})
	case c == 'f':
		return p.literal(path, "false", &node{kind: kindBool})
	case c == 'n':
		return p.literal(path, "null", &node{kind: kindNull})
	}
	return nil, p.fail(path, p.describe()+", expected a value")
}

func (p *jsonParser) literal(path, word string, n *node) (*node, error) {
	if len(p.data)-p.pos >= len(word) && string(p.data[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return n, nil
	}
	return nil, p.fail(path, p.describe()+", expected a value")
}

func (p *jsonParser) enter(path string) error {
	p.depth++
	if p.depth > maxNesting {
		return p.fail(path, fmt.Sprintf("nesting deeper than %d levels", maxNesting))
	}
	return nil
}

func (p *jsonParser) object(path string) (*node, error) {
	if err := p.enter(path); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '{'
	n := &node{kind: kindObject}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return n, nil
	}
	var seen map[string]bool
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail(path, p.describe()+", expected a field name")
		}
		key, err := p.str(path)
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail(path, p.describe()+", expected ':' after field name")
		}
		p.pos++
		child := joinKey(path, key)
		v, err := p.value(child)
		if err != nil {
			return nil, err
		}
		if len(n.keys) >= 8 && seen == nil {
			seen = make(map[string]bool, 2*len(n.keys))
			for _, k := range n.keys {
				seen[k] = true
			}
		}
		if dup := (seen != nil && seen[key]) || (seen == nil && containsString(n.keys, key)); dup {
			p.dups.add(child, "duplicate field")
		} else {
			n.keys = append(n.keys, key)
			n.vals = append(n.vals, v)
			if seen != nil {
				seen[key] = true
			}
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(path, "unexpected end of input, expected ',' or '}'")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return n, nil
		default:
			return nil, p.fail(path, p.describe()+", expected ',' or '}'")
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *jsonParser) array(path string) (*node, error) {
	if err := p.enter(path); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '['
	n := &node{kind: kindArray, items: []*node{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return n, nil
	}
	for {
		v, err := p.value(joinIndex(path, len(n.items)))
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(path, "unexpected end of input, expected ',' or ']'")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return n, nil
		default:
			return nil, p.fail(path, p.describe()+", expected ',' or ']'")
		}
	}
}

// str reads a JSON string starting at the opening quote.
func (p *jsonParser) str(path string) (string, error) {
	start := p.pos
	p.pos++
	escaped := false
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			raw := p.data[start:p.pos]
			if !escaped {
				if !utf8.Valid(raw) {
					return "", p.fail(path, "invalid UTF-8 in string")
				}
				return string(raw[1 : len(raw)-1]), nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", p.fail(path, "invalid escape sequence in string")
			}
			return s, nil
		case c == '\\':
			escaped = true
			p.pos += 2
		case c < 0x20:
			return "", p.fail(path, "control character in string")
		default:
			p.pos++
		}
	}
	p.pos = len(p.data)
	return "", p.fail(path, "unterminated string")
}

func (p *jsonParser) number(path string) (*node, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && isDigit(p.data[p.pos]) {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return nil, p.fail(path, "invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.fail(path, "invalid number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail(path, "invalid number")
		}
	}
	return &node{kind: kindNumber, text: string(p.data[start:p.pos])}, nil
}
