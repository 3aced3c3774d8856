package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds on a YAML document, checked before it is converted: its size,
// and the nodes its aliases expand it to. Aliases (and merge keys) are
// references in the parsed tree, free to hold; converting copies what they
// refer to, so a few hundred bytes of nested aliases ("billion laughs")
// would otherwise expand to millions of nodes before any other check.
const (
	// MaxYAMLBytes is the largest YAML document accepted, the API's
	// request limit (Maestro's 256 KB for a definition).
	MaxYAMLBytes = 256 << 10
	// maxYAMLNodes bounds the nodes of the expanded document; a 256 KB
	// document without aliases has at most about 130,000.
	maxYAMLNodes = 200_000
	// maxYAMLAliasNodes bounds the nodes aliases may add to the document's
	// own.
	maxYAMLAliasNodes = 50_000
)

// parseYAML parses one YAML document into a node tree with source positions.
func parseYAML(data []byte) (*node, []Problem) {
	if len(data) > MaxYAMLBytes {
		return nil, []Problem{{Message: fmt.Sprintf("the YAML document is %d bytes; the limit is %d", len(data), MaxYAMLBytes)}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, []Problem{{Message: "malformed YAML: empty document"}}
		}
		return nil, []Problem{{Message: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, []Problem{{Message: "malformed YAML: only one document is allowed"}}
	}
	if msg := checkExpansion(&doc); msg != "" {
		return nil, []Problem{{Message: msg}}
	}
	c := yamlConverter{}
	n := c.convert(&doc, "", 0)
	return n, c.list
}

// checkExpansion measures what the parsed document expands to, each node
// once (aliases are memoised): the nodes and the depth it would have once
// its aliases are copied. It returns why the document is refused, or "".
func checkExpansion(doc *yaml.Node) string {
	type shape struct{ nodes, depth int }
	memo := map[*yaml.Node]shape{}
	own := 0
	var measure func(n *yaml.Node) (shape, bool)
	measure = func(n *yaml.Node) (shape, bool) {
		if s, ok := memo[n]; ok {
			return s, s.nodes >= 0
		}
		memo[n] = shape{nodes: -1} // in progress: an alias back to it is a cycle
		own++
		s := shape{nodes: 1}
		kids := n.Content
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			kids = []*yaml.Node{n.Alias}
		}
		for _, k := range kids {
			ks, ok := measure(k)
			if !ok {
				return ks, false
			}
			s.nodes = min(s.nodes+ks.nodes, maxYAMLNodes+1)
			s.depth = max(s.depth, ks.depth+1)
		}
		memo[n] = s
		return s, true
	}
	s, ok := measure(doc)
	switch {
	case !ok:
		return "malformed YAML: an alias refers to a node that contains it"
	case s.nodes > maxYAMLNodes || s.nodes > own+maxYAMLAliasNodes:
		return fmt.Sprintf("the YAML document expands to more than %d nodes through its aliases (it has %d of its own); "+
			"the limit is %d, and aliases may add at most %d", min(s.nodes, maxYAMLNodes), own, maxYAMLNodes, maxYAMLAliasNodes)
	case s.depth > maxNesting:
		return fmt.Sprintf("the YAML document nests deeper than %d levels", maxNesting)
	}
	return ""
}

type yamlConverter struct {
	problems
	count int
}

func (c *yamlConverter) convert(y *yaml.Node, path string, depth int) *node {
	c.count++
	if c.count > maxYAMLNodes {
		if c.count == maxYAMLNodes+1 {
			c.add(path, "document expands to too many nodes")
		}
		return &node{kind: kindNull}
	}
	if depth > maxNesting {
		c.addf(path, "nesting deeper than %d levels", maxNesting)
		return &node{kind: kindNull}
	}
	n := &node{line: y.Line, col: y.Column}
	switch y.Kind {
	case yaml.DocumentNode:
		if len(y.Content) == 0 {
			n.kind = kindNull
			return n
		}
		return c.convert(y.Content[0], path, depth)
	case yaml.AliasNode:
		if y.Alias == nil {
			n.kind = kindNull
			return n
		}
		return c.convert(y.Alias, path, depth+1)
	case yaml.ScalarNode:
		c.scalar(y, n, path)
	case yaml.SequenceNode:
		n.kind = kindArray
		n.items = make([]*node, 0, len(y.Content))
		for i, it := range y.Content {
			n.items = append(n.items, c.convert(it, joinIndex(path, i), depth+1))
		}
	case yaml.MappingNode:
		n.kind = kindObject
		c.mapping(y, n, path, depth)
	}
	return n
}

func (c *yamlConverter) scalar(y *yaml.Node, n *node, path string) {
	v := y.Value
	switch y.ShortTag() {
	case "!!null":
		n.kind = kindNull
	case "!!bool":
		b, err := strconv.ParseBool(strings.ToLower(v))
		if err != nil {
			n.kind, n.text = kindString, v
			return
		}
		n.kind, n.b = kindBool, b
	case "!!int":
		// yaml.v3 tags 0x1F, 0o17, 017, +5 and 1_000 as !!int; JSON knows only
		// plain decimals, so every integer is re-spelled in base 10 (base 0
		// reads the prefixes, and a leading 0 as octal, as yaml.v3 does).
		clean := strings.ReplaceAll(v, "_", "")
		i, err := strconv.ParseInt(clean, 0, 64)
		if err != nil {
			i, err = strconv.ParseInt(clean, 10, 64)
		}
		if err != nil {
			c.addf(path, "integer %s is out of range%s", v, n.pos())
			n.kind = kindNull
			return
		}
		n.kind, n.text = kindNumber, strconv.FormatInt(i, 10)
	case "!!float":
		clean := strings.ReplaceAll(v, "_", "")
		f, err := strconv.ParseFloat(clean, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			c.addf(path, "number %s is not finite or out of range%s", v, n.pos())
			n.kind = kindNull
			return
		}
		if !isJSONNumber(clean) {
			clean = strconv.FormatFloat(f, 'g', -1, 64)
		}
		n.kind, n.text = kindNumber, clean
	default: // !!str, !!timestamp, !!binary and custom tags keep their text
		n.kind, n.text = kindString, v
	}
}

func (c *yamlConverter) mapping(y *yaml.Node, n *node, path string, depth int) {
	var merges []*node
	for i := 0; i+1 < len(y.Content); i += 2 {
		k, v := y.Content[i], y.Content[i+1]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			c.addf(path, "mapping keys must be scalars (line %d, column %d)", k.Line, k.Column)
			continue
		}
		if k.ShortTag() == "!!merge" || (k.Value == "<<" && k.Style == 0) {
			merges = append(merges, c.convert(v, path, depth+1))
			continue
		}
		key := k.Value
		child := joinKey(path, key)
		if containsString(n.keys, key) {
			c.addf(child, "duplicate field (line %d, column %d)", k.Line, k.Column)
			continue
		}
		n.keys = append(n.keys, key)
		n.vals = append(n.vals, c.convert(v, child, depth+1))
	}
	for _, m := range merges {
		sources := []*node{m}
		if m.kind == kindArray {
			sources = m.items
		}
		for _, src := range sources {
			if src.kind != kindObject {
				c.add(path, "a merge key (<<) must refer to a mapping"+src.pos())
				continue
			}
			for i, k := range src.keys {
				if !containsString(n.keys, k) {
					n.keys = append(n.keys, k)
					n.vals = append(n.vals, src.vals[i])
				}
			}
		}
	}
}

// isJSONNumber reports whether s is a number in JSON syntax.
func isJSONNumber(s string) bool {
	p := &jsonParser{data: []byte(s)}
	if len(s) == 0 || !(s[0] == '-' || isDigit(s[0])) {
		return false
	}
	_, err := p.number("")
	return err == nil && p.pos == len(s)
}
