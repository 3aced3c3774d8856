package sel

import "strings"

// checker resolves a parsed program in place: it gives every variable a
// slot, turns class-qualified calls and fields into built-ins, binds
// extension functions, records the free names read and rejects what can be
// rejected before running.
type checker struct {
	src       string
	funcs     map[string]Func
	slots     map[string]int
	slotNames []string
	assigned  map[string]bool // names written so far, in evaluation order
	names     map[string]bool // free names read
	loops     int
}

// checkError carries the first error out of the recursive walk.
type checkError struct{ err *Error }

// classNames are the identifiers that denote classes, not variables.
var classNames = map[string]bool{
	"Math": true, "String": true, "Long": true, "Integer": true, "Double": true,
	"Float": true, "Boolean": true, "System": true, "Arrays": true, "UUID": true,
	"DateTime": true, "DateTimeZone": true, "DateTimeFormat": true,
	"DateTimeFormatter": true, "Days": true, "DateTimeConstants": true, "Util": true,
	"Map": true, "HashMap": true, "LinkedHashMap": true, "Object": true,
}

func newChecker(src string, funcs map[string]Func) *checker {
	return &checker{
		src:      src,
		funcs:    funcs,
		slots:    map[string]int{},
		assigned: map[string]bool{},
		names:    map[string]bool{},
	}
}

func (c *checker) check(body []stmt) (err *Error) {
	defer func() {
		if r := recover(); r != nil {
			ce, ok := r.(checkError)
			if !ok {
				panic(r)
			}
			err = ce.err
		}
	}()
	for _, s := range body {
		c.stmt(s)
	}
	return nil
}

func (c *checker) fail(off int, kind ErrorKind, format string, args ...any) {
	panic(checkError{newError(c.src, off, kind, nil, format, args...)})
}

func (c *checker) slot(name string) int {
	if i, ok := c.slots[name]; ok {
		return i
	}
	i := len(c.slotNames)
	c.slots[name] = i
	c.slotNames = append(c.slotNames, name)
	return i
}

// resolveType fills in a typeRef from its spelling.
func (c *checker) resolveType(off int, t *typeRef) {
	info, ok := typeNames[t.name]
	if !ok {
		switch t.name {
		case "byte", "short", "char":
			c.fail(off, KindType, "type %s is not supported in SEL; use long or String", t.name)
		}
		c.fail(off, KindType, "unknown type %s", t.name)
	}
	info.name, info.array = t.name, t.array
	if info.array {
		switch info.base {
		case btLong, btDouble, btBool, btString:
		default:
			c.fail(off, KindType, "cannot create an array of %s", t.name)
		}
	}
	*t = info
}

// declare marks a variable as written and returns its slot.
func (c *checker) declare(name string, off int) int {
	c.reserved(name, off)
	c.assigned[name] = true
	return c.slot(name)
}

func (c *checker) reserved(name string, off int) {
	if classNames[name] {
		c.fail(off, KindType, "%s is a class and cannot be assigned", name)
	}
	if name == "params" {
		c.fail(off, KindType, "params is read-only")
	}
}

func (c *checker) stmt(s stmt) {
	switch s := s.(type) {
	case *exprStmt:
		s.x = c.expr(s.x)
	case *declStmt:
		c.resolveType(s.p, &s.t)
		for i := range s.vars {
			v := &s.vars[i]
			if v.init != nil {
				v.init = c.expr(v.init)
			}
			v.slot = c.declare(v.name, v.p)
		}
	case *blockStmt:
		for _, x := range s.list {
			c.stmt(x)
		}
	case *ifStmt:
		s.cond = c.expr(s.cond)
		c.stmt(s.then)
		if s.els != nil {
			c.stmt(s.els)
		}
	case *whileStmt:
		s.cond = c.expr(s.cond)
		c.loops++
		c.stmt(s.body)
		c.loops--
	case *forStmt:
		for _, x := range s.init {
			c.stmt(x)
		}
		if s.cond != nil {
			s.cond = c.expr(s.cond)
		}
		c.loops++
		c.stmt(s.body)
		c.loops--
		for i, u := range s.update {
			s.update[i] = c.expr(u)
		}
	case *forEachStmt:
		c.resolveType(s.p, &s.t)
		s.x = c.expr(s.x)
		s.slot = c.declare(s.name, s.p)
		c.loops++
		c.stmt(s.body)
		c.loops--
	case *breakStmt:
		if c.loops == 0 {
			c.fail(s.p, KindSyntax, "break outside of a loop")
		}
	case *continueStmt:
		if c.loops == 0 {
			c.fail(s.p, KindSyntax, "continue outside of a loop")
		}
	case *returnStmt:
		if s.x != nil {
			s.x = c.expr(s.x)
		}
	case *throwStmt:
		if n, ok := s.x.(*newExpr); ok && isThrowable(n.t.name) {
			// throw new IllegalArgumentException("msg") throws "msg".
			switch len(n.args) {
			case 0:
				s.x = &litExpr{p: n.p, v: strV(n.t.name)}
			case 1:
				s.x = n.args[0]
			default:
				c.fail(n.p, KindType, "%s takes at most one argument here", n.t.name)
			}
		}
		s.x = c.expr(s.x)
	case *emptyStmt:
	}
}

func isThrowable(name string) bool {
	return strings.HasSuffix(name, "Exception") || strings.HasSuffix(name, "Error")
}

// regexMethods take a regular expression as their first argument.
var regexMethods = map[string]bool{"split": true, "replaceAll": true, "replaceFirst": true, "matches": true}

func (c *checker) exprs(list []expr) {
	for i, x := range list {
		list[i] = c.expr(x)
	}
}

func (c *checker) expr(e expr) expr {
	switch e := e.(type) {
	case *litExpr:
		return e
	case *identExpr:
		if classNames[e.name] {
			c.fail(e.p, KindType, "class %s cannot be used as a value", e.name)
		}
		if e.name == "params" {
			c.fail(e.p, KindType, "params cannot be used as a value; use params.get('name') or params['name']")
		}
		if !c.assigned[e.name] {
			c.names[e.name] = true
		}
		e.slot = c.slot(e.name)
		return e
	case *binExpr:
		e.l, e.r = c.expr(e.l), c.expr(e.r)
		return e
	case *logicExpr:
		e.l, e.r = c.expr(e.l), c.expr(e.r)
		return e
	case *unaryExpr:
		e.x = c.expr(e.x)
		return e
	case *condExpr:
		e.c, e.a, e.b = c.expr(e.c), c.expr(e.a), c.expr(e.b)
		return e
	case *assignExpr:
		switch t := e.target.(type) {
		case *identExpr:
			if e.op != opNone {
				c.expr(t) // a compound assignment reads first
			}
			e.val = c.expr(e.val)
			t.slot = c.declare(t.name, t.p)
		case *indexExpr:
			if id, ok := t.x.(*identExpr); ok && id.name == "params" {
				c.fail(t.p, KindType, "params is read-only")
			}
			t.x, t.idx = c.expr(t.x), c.expr(t.idx)
			e.val = c.expr(e.val)
		}
		return e
	case *incDecExpr:
		switch t := e.target.(type) {
		case *identExpr:
			c.reserved(t.name, t.p)
			c.expr(t)
			c.assigned[t.name] = true
		case *indexExpr:
			if id, ok := t.x.(*identExpr); ok && id.name == "params" {
				c.fail(t.p, KindType, "params is read-only")
			}
			t.x, t.idx = c.expr(t.x), c.expr(t.idx)
		}
		return e
	case *castExpr:
		c.resolveType(e.p, &e.t)
		e.x = c.expr(e.x)
		return e
	case *callExpr:
		return c.call(e)
	case *fieldExpr:
		if id, ok := e.recv.(*identExpr); ok {
			if classNames[id.name] {
				v, ok := staticFields[id.name+"."+e.name]
				if !ok {
					c.fail(e.p, KindType, "unknown field %s.%s", id.name, e.name)
				}
				return &litExpr{p: e.p, v: v}
			}
			if id.name == "params" {
				c.fail(e.p, KindType, "params has no fields; use params.get('%s')", e.name)
			}
		}
		if e.name != "length" {
			c.fail(e.p, KindType, "unknown field %s (only arrays have a field: length)", e.name)
		}
		e.recv = c.expr(e.recv)
		return e
	case *indexExpr:
		if id, ok := e.x.(*identExpr); ok && id.name == "params" {
			return c.paramsGet(e.p, e.idx)
		}
		e.x, e.idx = c.expr(e.x), c.expr(e.idx)
		return e
	case *newExpr:
		ctor, ok := constructors[e.t.name]
		if !ok {
			if isThrowable(e.t.name) {
				c.fail(e.p, KindType, "%s can only be thrown: throw new %s(\"message\")", e.t.name, e.t.name)
			}
			c.fail(e.p, KindType, "cannot create an instance of %s", e.t.name)
		}
		e.ctor = ctor
		c.exprs(e.args)
		return e
	case *newArrayExpr:
		e.t.array = true
		c.resolveType(e.p, &e.t)
		e.t.array = false
		if e.size != nil {
			e.size = c.expr(e.size)
		}
		c.exprs(e.init)
		return e
	}
	c.fail(e.pos(), KindSyntax, "unsupported expression")
	return nil
}

func (c *checker) paramsGet(off int, key expr) expr {
	key = c.expr(key)
	if lit, ok := key.(*litExpr); ok && lit.v.k == kString {
		c.names[lit.v.s] = true
	}
	return &paramsGetExpr{p: off, key: key}
}

func (c *checker) call(e *callExpr) expr {
	// Bare call: f(args).
	if e.recv == nil {
		c.exprs(e.args)
		if f, ok := c.funcs[e.name]; ok {
			e.ext, e.extKey = f, e.name
		} else {
			e.unres = "unknown function " + e.name + " (not registered)"
		}
		return e
	}
	if e.recvName != "" && !c.assigned[e.recvName] {
		key := e.recvName + "." + e.name
		if f, ok := c.funcs[key]; ok {
			c.exprs(e.args)
			e.ext, e.extKey, e.recv = f, key, nil
			return e
		}
		if e.recvName == "params" {
			c.exprs(e.args)
			switch {
			case e.name == "get" && len(e.args) == 1:
				return c.paramsGet(e.p, e.args[0])
			case e.name == "containsKey" && len(e.args) == 1:
				return &paramsHasExpr{p: e.p, key: e.args[0]}
			}
			e.recv = nil
			e.unres = "unknown function params." + e.name + " (not registered)"
			return e
		}
		if classNames[e.recvName] {
			c.exprs(e.args)
			e.recv = nil
			m, ok := staticMethods[key]
			if !ok {
				if e.recvName == "Util" {
					e.unres = "unknown function " + key + " (not registered)"
					return e
				}
				c.fail(e.p, KindType, "unknown method %s", key)
			}
			if !m.arity(len(e.args)) {
				c.fail(e.p, KindType, "%s does not take %d argument(s)", key, len(e.args))
			}
			e.static = m.fn
			return e
		}
	}
	e.recv = c.expr(e.recv)
	c.exprs(e.args)
	if regexMethods[e.name] && len(e.args) > 0 {
		if lit, ok := e.args[0].(*litExpr); ok && lit.v.k == kString {
			pattern := lit.v.s
			if e.name == "matches" {
				pattern = anchorPattern(pattern)
			}
			if re, err := compileJavaRegex(pattern); err == nil {
				e.re = re
			}
		}
	}
	return e
}

// staticMethod is a built-in reachable as Class.method(...).
type staticMethod struct {
	fn      staticFn
	minArgs int
	maxArgs int // -1: variadic
}

func (m staticMethod) arity(n int) bool {
	return n >= m.minArgs && (m.maxArgs < 0 || n <= m.maxArgs)
}

// staticFn implements a static method or constructor; args are evaluated.
type staticFn func(st *state, p int, args []value) value
