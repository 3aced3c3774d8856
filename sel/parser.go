package sel

import "fmt"

// parser is a recursive-descent parser for SEL's Java subset. It works on the
// full token slice so that declarations can be recognised by trying to parse
// a type and backing off.
type parser struct {
	src      string
	toks     []token
	i        int
	depth    int
	maxDepth int
}

// parseError carries a positioned error out of the recursive descent; parse
// recovers it at the top. It never leaves the package.
type parseError struct{ err *Error }

// parse turns src into a statement list.
func parse(src string, lim Limits) (body []stmt, err *Error) {
	toks, lerr := lex(src)
	if lerr != nil {
		return nil, lerr
	}
	p := &parser{src: src, toks: toks, maxDepth: lim.MaxStackDepth}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			body, err = nil, pe.err
		}
	}()
	for p.isKeyword("import") {
		p.skipImport()
	}
	for p.cur().kind != tEOF {
		body = append(body, p.statement(true))
	}
	return body, nil
}

func (p *parser) cur() *token { return &p.toks[p.i] }

func (p *parser) peek(n int) *token {
	if p.i+n < len(p.toks) {
		return &p.toks[p.i+n]
	}
	return &p.toks[len(p.toks)-1]
}

func (p *parser) advance() *token {
	t := &p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) fail(off int, kind ErrorKind, format string, args ...any) {
	panic(parseError{newError(p.src, off, kind, nil, format, args...)})
}

func (p *parser) failf(off int, format string, args ...any) {
	p.fail(off, KindSyntax, format, args...)
}

func describe(t *token) string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return "string literal"
	case tInt, tFloat:
		return "number " + t.text
	case tIdent:
		return "identifier " + t.text
	default:
		return "'" + t.text + "'"
	}
}

func (p *parser) isOp(s string) bool {
	t := p.cur()
	return t.kind == tOp && t.text == s
}

func (p *parser) isKeyword(s string) bool {
	t := p.cur()
	return t.kind == tKeyword && t.text == s
}

func (p *parser) accept(s string) bool {
	if p.isOp(s) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expect(s string) *token {
	if !p.isOp(s) {
		p.failf(p.cur().pos, "expected '%s', found %s", s, describe(p.cur()))
	}
	return p.advance()
}

func (p *parser) expectIdent() *token {
	if p.cur().kind != tIdent {
		p.failf(p.cur().pos, "expected an identifier, found %s", describe(p.cur()))
	}
	return p.advance()
}

// enter and leave track syntactic nesting against Limits.MaxStackDepth.
func (p *parser) enter() {
	p.depth++
	if p.depth >= p.maxDepth {
		p.fail(p.cur().pos, KindLimit, "expression is nested too deeply (stack depth limit %d)", p.maxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

func (p *parser) skipImport() {
	start := p.advance()
	for !p.isOp(";") {
		if p.cur().kind == tEOF {
			p.failf(start.pos, "unterminated import declaration")
		}
		p.advance()
	}
	p.advance()
}

// unsupportedKeywords name Java statements SEL does not have.
var unsupportedKeywords = map[string]bool{
	"switch": true, "case": true, "default": true, "do": true, "try": true, "catch": true,
	"finally": true, "class": true, "interface": true, "synchronized": true, "goto": true,
	"const": true, "package": true, "import": true, "static": true, "public": true,
	"private": true, "protected": true, "abstract": true, "native": true, "transient": true,
	"volatile": true, "throws": true, "extends": true, "implements": true, "void": true,
	"this": true, "super": true, "instanceof": true,
}

// statement parses one statement. top marks a top-level statement, whose
// closing semicolon may be omitted at the end of the input.
func (p *parser) statement(top bool) stmt {
	p.enter()
	defer p.leave()
	t := p.cur()
	if t.kind == tOp {
		switch t.text {
		case ";":
			p.advance()
			return &emptyStmt{p: t.pos}
		case "{":
			return p.block()
		}
	}
	if t.kind == tKeyword {
		switch t.text {
		case "if":
			p.advance()
			p.expect("(")
			cond := p.expr()
			p.expect(")")
			s := &ifStmt{p: t.pos, cond: cond, then: p.statement(false)}
			if p.isKeyword("else") {
				p.advance()
				s.els = p.statement(false)
			}
			return s
		case "while":
			p.advance()
			p.expect("(")
			cond := p.expr()
			p.expect(")")
			return &whileStmt{p: t.pos, cond: cond, body: p.statement(false)}
		case "for":
			return p.forStatement()
		case "break":
			p.advance()
			p.endStatement(top)
			return &breakStmt{p: t.pos}
		case "continue":
			p.advance()
			p.endStatement(top)
			return &continueStmt{p: t.pos}
		case "return":
			p.advance()
			s := &returnStmt{p: t.pos}
			if !p.isOp(";") && p.cur().kind != tEOF {
				s.x = p.expr()
			}
			p.endStatement(top)
			return s
		case "throw":
			p.advance()
			s := &throwStmt{p: t.pos, x: p.expr()}
			p.endStatement(top)
			return s
		case "else":
			p.failf(t.pos, "'else' without 'if'")
		}
		if unsupportedKeywords[t.text] {
			p.failf(t.pos, "'%s' is not supported in SEL", t.text)
		}
	}
	if d := p.tryDeclaration(); d != nil {
		p.endStatement(top)
		return d
	}
	x := p.expr()
	p.endStatement(top)
	return &exprStmt{p: t.pos, x: x}
}

func (p *parser) endStatement(top bool) {
	if top && p.cur().kind == tEOF {
		return
	}
	if !p.isOp(";") {
		p.failf(p.cur().pos, "expected ';', found %s", describe(p.cur()))
	}
	p.advance()
}

func (p *parser) block() *blockStmt {
	open := p.expect("{")
	b := &blockStmt{p: open.pos}
	for !p.isOp("}") {
		if p.cur().kind == tEOF {
			p.failf(open.pos, "unclosed '{'")
		}
		b.list = append(b.list, p.statement(false))
	}
	p.advance()
	return b
}

func (p *parser) forStatement() stmt {
	t := p.advance()
	p.expect("(")
	// Enhanced for: for (Type name : expr)
	save := p.i
	if p.isKeyword("final") {
		p.advance()
	}
	if typ, ok := p.tryType(); ok && p.cur().kind == tIdent && p.peek(1).kind == tOp && p.peek(1).text == ":" {
		name := p.advance()
		p.advance()
		x := p.expr()
		p.expect(")")
		return &forEachStmt{p: t.pos, t: typ, name: name.text, x: x, body: p.statement(false)}
	}
	p.i = save
	s := &forStmt{p: t.pos}
	if !p.isOp(";") {
		if d := p.tryDeclaration(); d != nil {
			s.init = []stmt{d}
		} else {
			for {
				x := p.expr()
				s.init = append(s.init, &exprStmt{p: x.pos(), x: x})
				if !p.accept(",") {
					break
				}
			}
		}
	}
	p.expect(";")
	if !p.isOp(";") {
		s.cond = p.expr()
	}
	p.expect(";")
	if !p.isOp(")") {
		for {
			s.update = append(s.update, p.expr())
			if !p.accept(",") {
				break
			}
		}
	}
	p.expect(")")
	s.body = p.statement(false)
	return s
}

// typeNames maps the type names SEL accepts to their meaning. int and
// Integer are 64-bit, as in Maestro's SEL; float is a double.
var typeNames = map[string]typeRef{
	"int":               {base: btLong, int32: true},
	"long":              {base: btLong},
	"Integer":           {base: btLong, boxed: true, int32: true},
	"Long":              {base: btLong, boxed: true},
	"float":             {base: btDouble, f32: true},
	"double":            {base: btDouble},
	"Float":             {base: btDouble, boxed: true, f32: true},
	"Double":            {base: btDouble, boxed: true},
	"boolean":           {base: btBool},
	"Boolean":           {base: btBool, boxed: true},
	"String":            {base: btString},
	"Map":               {base: btMap},
	"HashMap":           {base: btMap},
	"LinkedHashMap":     {base: btMap},
	"DateTime":          {base: btDateTime},
	"DateTimeZone":      {base: btZone},
	"DateTimeFormatter": {base: btFormatter},
	"DateTimeFormat":    {base: btFormatter},
	"Property":          {base: btProperty},
	"Days":              {base: btDays},
	"UUID":              {base: btUUID},
	"Object":            {base: btDynamic},
}

var primitiveKeywords = map[string]bool{
	"int": true, "long": true, "float": true, "double": true, "boolean": true,
	"byte": true, "short": true, "char": true,
}

// tryType parses a type if one starts here, without consuming anything when
// it fails. Unknown class names parse (check reports them).
func (p *parser) tryType() (typeRef, bool) {
	save := p.i
	t := p.cur()
	var tr typeRef
	switch {
	case t.kind == tKeyword && primitiveKeywords[t.text]:
		p.advance()
		tr = typeRef{name: t.text}
	case t.kind == tIdent:
		p.advance()
		name := t.text
		// Qualified names such as DateTime.Property or java.lang.String.
		for p.isOp(".") && p.peek(1).kind == tIdent {
			p.advance()
			name = p.advance().text
		}
		tr = typeRef{name: name}
		if p.isOp("<") {
			if !p.skipTypeArgs() {
				p.i = save
				return typeRef{}, false
			}
		}
	default:
		return typeRef{}, false
	}
	if p.isOp("[") && p.peek(1).kind == tOp && p.peek(1).text == "]" {
		p.i += 2
		tr.array = true
	}
	return tr, true
}

// skipTypeArgs skips <...> generic arguments, which SEL ignores.
func (p *parser) skipTypeArgs() bool {
	p.advance() // <
	if p.accept(">") {
		return true
	}
	for {
		if p.accept("?") {
			if p.cur().kind == tKeyword && (p.cur().text == "extends" || p.cur().text == "super") {
				p.advance()
			} else if p.isOp(",") || p.isOp(">") {
				goto next
			}
		}
		if _, ok := p.tryType(); !ok {
			return false
		}
	next:
		if p.accept(",") {
			continue
		}
		return p.accept(">")
	}
}

// tryDeclaration parses `[final] Type name [= init] (, name [= init])*` if the
// tokens here form one, and returns nil (consuming nothing) otherwise.
func (p *parser) tryDeclaration() *declStmt {
	save := p.i
	start := p.cur().pos
	final := false
	if p.isKeyword("final") {
		p.advance()
		final = true
	}
	typ, ok := p.tryType()
	if !ok || p.cur().kind != tIdent {
		if final {
			p.failf(start, "expected a declaration after 'final'")
		}
		p.i = save
		return nil
	}
	d := &declStmt{p: start, t: typ}
	for {
		name := p.expectIdent()
		v := declVar{p: name.pos, name: name.text}
		if p.isOp("[") && p.peek(1).kind == tOp && p.peek(1).text == "]" {
			p.failf(p.cur().pos, "C-style array declarators are not supported; write %s[] %s", typ.name, name.text)
		}
		if p.accept("=") {
			if p.isOp("{") {
				v.init = p.arrayInit(typ)
			} else {
				v.init = p.expr()
			}
		}
		d.vars = append(d.vars, v)
		if !p.accept(",") {
			break
		}
	}
	return d
}

// arrayInit parses `{a, b, c}` for a declaration of type typ.
func (p *parser) arrayInit(typ typeRef) expr {
	open := p.cur()
	if !typ.array {
		p.failf(open.pos, "an array initializer needs an array type, not %s", typ)
	}
	elem := typ
	elem.array = false
	return &newArrayExpr{p: open.pos, t: elem, init: p.arrayElems(), hasInit: true}
}

func (p *parser) arrayElems() []expr {
	p.enter()
	defer p.leave()
	p.expect("{")
	var list []expr
	for !p.isOp("}") {
		list = append(list, p.expr())
		if !p.accept(",") {
			break
		}
	}
	p.expect("}")
	if list == nil {
		list = []expr{}
	}
	return list
}

var assignOps = map[string]opKind{
	"=": opNone, "+=": opAdd, "-=": opSub, "*=": opMul, "/=": opDiv, "%=": opRem,
}

var unsupportedOps = map[string]bool{
	"&": true, "|": true, "^": true, "<<": true, ">>": true, ">>>": true,
	"&=": true, "|=": true, "^=": true, "<<=": true, ">>=": true, ">>>=": true, "~": true,
	"@": true,
}

func (p *parser) expr() expr {
	p.enter()
	defer p.leave()
	lhs := p.ternary()
	t := p.cur()
	if t.kind == tOp {
		if op, ok := assignOps[t.text]; ok {
			switch lhs.(type) {
			case *identExpr, *indexExpr:
			default:
				p.failf(t.pos, "invalid assignment target")
			}
			p.advance()
			return &assignExpr{p: t.pos, op: op, target: lhs, val: p.expr()}
		}
		if unsupportedOps[t.text] {
			p.failf(t.pos, "operator '%s' is not supported in SEL", t.text)
		}
	}
	return lhs
}

func (p *parser) ternary() expr {
	c := p.binary(1)
	if t := p.cur(); t.kind == tOp && t.text == "?" {
		p.advance()
		p.enter()
		a := p.expr()
		p.expect(":")
		b := p.ternary()
		p.leave()
		return &condExpr{p: t.pos, c: c, a: a, b: b}
	}
	return c
}

var binaryOps = map[string]struct {
	prec int
	op   opKind
}{
	"||": {1, opOr}, "&&": {2, opAnd},
	"==": {3, opEq}, "!=": {3, opNe},
	"<": {4, opLt}, ">": {4, opGt}, "<=": {4, opLe}, ">=": {4, opGe},
	"+": {5, opAdd}, "-": {5, opSub},
	"*": {6, opMul}, "/": {6, opDiv}, "%": {6, opRem},
}

// binary parses left-associative binary operators by precedence climbing.
func (p *parser) binary(minPrec int) expr {
	left := p.unary()
	for {
		t := p.cur()
		if t.kind == tKeyword && t.text == "instanceof" {
			p.failf(t.pos, "'instanceof' is not supported in SEL")
		}
		if t.kind != tOp {
			return left
		}
		if unsupportedOps[t.text] {
			p.failf(t.pos, "operator '%s' is not supported in SEL", t.text)
		}
		info, ok := binaryOps[t.text]
		if !ok || info.prec < minPrec {
			return left
		}
		p.advance()
		right := p.binary(info.prec + 1)
		if info.op == opAnd || info.op == opOr {
			left = &logicExpr{p: t.pos, and: info.op == opAnd, l: left, r: right}
		} else {
			left = &binExpr{p: t.pos, op: info.op, l: left, r: right}
		}
	}
}

func (p *parser) unary() expr {
	t := p.cur()
	if t.kind == tOp {
		switch t.text {
		case "-", "+", "!":
			p.advance()
			if t.text == "-" {
				if n := p.cur(); n.kind == tInt && n.minOnly {
					p.advance()
					return p.postfix(&litExpr{p: t.pos, v: longV(-1 << 63)})
				}
			}
			p.enter()
			x := p.unary()
			p.leave()
			op := map[string]opKind{"-": opNeg, "+": opPlus, "!": opNot}[t.text]
			return &unaryExpr{p: t.pos, op: op, x: x}
		case "++", "--":
			p.advance()
			p.enter()
			x := p.unary()
			p.leave()
			return p.incDec(t, x, true)
		case "~":
			p.failf(t.pos, "operator '~' is not supported in SEL")
		case "(":
			if c := p.tryCast(); c != nil {
				return c
			}
		}
	}
	return p.postfix(p.primary())
}

func (p *parser) incDec(t *token, target expr, prefix bool) expr {
	switch target.(type) {
	case *identExpr, *indexExpr:
	default:
		p.failf(t.pos, "invalid target for '%s'", t.text)
	}
	delta := int64(1)
	if t.text == "--" {
		delta = -1
	}
	return &incDecExpr{p: t.pos, target: target, delta: delta, prefix: prefix}
}

// tryCast parses `(type) operand` when the parenthesis holds a cast.
func (p *parser) tryCast() expr {
	open := p.cur()
	n1, n2 := p.peek(1), p.peek(2)
	switch {
	case n1.kind == tKeyword && primitiveKeywords[n1.text]:
	case n1.kind == tIdent && n2.kind == tOp && (n2.text == ")" || n2.text == "["):
		// (Name) or (Name[]) followed by something that can start an operand
		// other than + or -: Java's rule for reference casts.
		k := 3
		if n2.text == "[" {
			if p.peek(3).kind != tOp || p.peek(3).text != "]" || p.peek(4).kind != tOp || p.peek(4).text != ")" {
				return nil
			}
			k = 5
		}
		after := p.peek(k)
		switch after.kind {
		case tIdent, tInt, tFloat, tString:
		case tKeyword:
			if after.text != "new" && after.text != "true" && after.text != "false" && after.text != "null" {
				return nil
			}
		case tOp:
			if after.text != "(" && after.text != "!" {
				return nil
			}
		default:
			return nil
		}
	default:
		return nil
	}
	p.advance()
	typ, ok := p.tryType()
	if !ok {
		return nil
	}
	p.expect(")")
	p.enter()
	x := p.unary()
	p.leave()
	return &castExpr{p: open.pos, t: typ, x: x}
}

func (p *parser) postfix(x expr) expr {
	for {
		t := p.cur()
		if t.kind != tOp {
			return x
		}
		switch t.text {
		case ".":
			p.advance()
			name := p.expectIdent()
			recvName := ""
			if id, ok := x.(*identExpr); ok {
				recvName = id.name
			}
			if p.isOp("(") {
				x = &callExpr{p: name.pos, recv: x, recvName: recvName, name: name.text, args: p.args()}
			} else {
				x = &fieldExpr{p: name.pos, recv: x, name: name.text}
			}
		case "[":
			p.advance()
			p.enter()
			idx := p.expr()
			p.leave()
			p.expect("]")
			x = &indexExpr{p: t.pos, x: x, idx: idx}
		case "++", "--":
			p.advance()
			return p.incDec(t, x, false)
		default:
			return x
		}
	}
}

func (p *parser) args() []expr {
	p.enter()
	defer p.leave()
	p.expect("(")
	args := []expr{}
	if p.accept(")") {
		return args
	}
	for {
		args = append(args, p.expr())
		if p.accept(")") {
			return args
		}
		p.expect(",")
	}
}

func (p *parser) primary() expr {
	t := p.cur()
	switch t.kind {
	case tInt:
		p.advance()
		if t.minOnly {
			p.failf(t.pos, "integer number too large: %s", t.text)
		}
		return &litExpr{p: t.pos, v: longV(t.ival)}
	case tFloat:
		p.advance()
		return &litExpr{p: t.pos, v: doubleV(t.fval)}
	case tString:
		p.advance()
		return &litExpr{p: t.pos, v: strV(t.sval)}
	case tIdent:
		p.advance()
		if p.isOp("(") {
			return &callExpr{p: t.pos, name: t.text, args: p.args()}
		}
		return &identExpr{p: t.pos, name: t.text, slot: -1}
	case tKeyword:
		switch t.text {
		case "true":
			p.advance()
			return &litExpr{p: t.pos, v: trueV}
		case "false":
			p.advance()
			return &litExpr{p: t.pos, v: falseV}
		case "null":
			p.advance()
			return &litExpr{p: t.pos, v: nullV}
		case "new":
			return p.creator()
		}
		if unsupportedKeywords[t.text] {
			p.failf(t.pos, "'%s' is not supported in SEL", t.text)
		}
	case tOp:
		if t.text == "(" {
			p.advance()
			p.enter()
			x := p.expr()
			p.leave()
			p.expect(")")
			return x
		}
	}
	p.failf(t.pos, "expected an expression, found %s", describe(t))
	return nil
}

// creator parses what follows `new`.
func (p *parser) creator() expr {
	t := p.advance() // new
	n := p.cur()
	var typ typeRef
	switch {
	case n.kind == tKeyword && primitiveKeywords[n.text]:
		p.advance()
		typ = typeRef{name: n.text}
	case n.kind == tIdent:
		p.advance()
		name := n.text
		for p.isOp(".") && p.peek(1).kind == tIdent {
			p.advance()
			name = p.advance().text
		}
		typ = typeRef{name: name}
		if p.isOp("<") && !p.skipTypeArgs() {
			p.failf(p.cur().pos, "malformed type arguments")
		}
	default:
		p.failf(n.pos, "expected a type after 'new', found %s", describe(n))
	}
	if p.isOp("[") {
		p.advance()
		if p.accept("]") {
			if p.isOp("[") {
				p.failf(p.cur().pos, "SEL supports one-dimensional arrays only")
			}
			return &newArrayExpr{p: t.pos, t: typ, init: p.arrayElems(), hasInit: true}
		}
		p.enter()
		size := p.expr()
		p.leave()
		p.expect("]")
		if p.isOp("[") {
			p.failf(p.cur().pos, "SEL supports one-dimensional arrays only")
		}
		return &newArrayExpr{p: t.pos, t: typ, size: size}
	}
	if !p.isOp("(") {
		p.failf(p.cur().pos, "expected '(' or '[' after 'new %s', found %s", typ.name, describe(p.cur()))
	}
	return &newExpr{p: t.pos, t: typ, args: p.args()}
}

// String renders a token for debugging.
func (t token) String() string { return fmt.Sprintf("%d:%q", t.kind, t.text) }
