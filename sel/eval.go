package sel

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// selPanic carries an *Error from deep inside evaluation to Program.Eval,
// which recovers it. It never leaves the package.
type selPanic struct{ err *Error }

// slot is one variable. Variables share a single flat namespace per
// evaluation, as in Maestro's SEL: a name declared in a loop is still visible
// after it, and a free name is loaded from the Env on first read.
type slot struct {
	v   value
	set bool
	t   *typeRef // declared type, nil when never declared
}

// state is the per-evaluation mutable state.
type state struct {
	ctx    context.Context
	prog   *Program
	env    Env
	slots  []slot
	visits int64
	mem    int64
	lim    *Limits
	// pool, when set, backs mem: reserved bytes of it are held until the
	// evaluation ends (pool.go).
	pool     MemoryPool
	reserved int64
	ret      value
	last     value
	lastPos  int
}

func newState(ctx context.Context, p *Program, env Env) *state {
	return &state{ctx: ctx, prog: p, env: env, slots: make([]slot, p.nslots), lim: &p.limits, pool: poolFrom(ctx)}
}

// releasePool returns what the evaluation reserved of its pool.
func (st *state) releasePool() {
	if st.reserved > 0 {
		st.pool.Release(st.reserved)
		st.reserved = 0
	}
}

func (st *state) fail(p int, kind ErrorKind, format string, args ...any) {
	panic(selPanic{newError(st.prog.src, p, kind, nil, format, args...)})
}

func (st *state) failCause(p int, kind ErrorKind, cause error, format string, args ...any) {
	panic(selPanic{newError(st.prog.src, p, kind, cause, format, args...)})
}

// tick counts one visited node and polls the context every 1024 visits.
func (st *state) tick(p int) {
	st.visits++
	if st.visits >= st.lim.MaxVisits {
		st.fail(p, KindLimit, "evaluation aborted: more than %d operations (visit limit)", st.lim.MaxVisits)
	}
	if st.visits&1023 == 0 {
		st.lastPos = p
		if err := st.ctx.Err(); err != nil {
			st.failCause(p, KindLimit, err, "evaluation aborted: %v", err)
		}
	}
}

// charge adds n bytes to the memory budget.
func (st *state) charge(p int, n int64) {
	st.mem += n
	if st.mem >= st.lim.MaxMemoryBytes {
		st.fail(p, KindLimit, "evaluation aborted: more than %d bytes allocated (memory limit)", st.lim.MaxMemoryBytes)
	}
	if st.pool != nil && st.mem > st.reserved {
		need := (st.mem - st.reserved + PoolChunk - 1) / PoolChunk * PoolChunk
		if !st.pool.Reserve(need) {
			st.failCause(p, KindLimit, ErrPoolExhausted,
				"evaluation aborted: %v after %d bytes allocated (the process's memory for expressions is in use)", ErrPoolExhausted, st.mem)
		}
		st.reserved += need
	}
}

// checkStrLen fails when a string of n bytes would break the string limit,
// and charges it otherwise. Call it before building the string.
func (st *state) checkStrLen(p int, n int) {
	if n >= st.lim.MaxStringLength {
		st.fail(p, KindLimit, "string length %d is over the limit %d", n, st.lim.MaxStringLength)
	}
	st.charge(p, int64(n)+16)
}

// newArray allocates an array of n elements of the given element kind,
// filled with Java's default values.
func (st *state) newArray(p int, elem kind, n int64) *array {
	if n < 0 {
		st.fail(p, KindRuntime, "NegativeArraySizeException: %d", n)
	}
	if n >= int64(st.lim.MaxArrayLength) {
		st.fail(p, KindLimit, "new array size is over the limit: %d vs length: %d", st.lim.MaxArrayLength, n)
	}
	st.charge(p, 8*n+16)
	a := &array{elem: elem, v: make([]value, n)}
	var zero value
	switch elem {
	case kLong:
		zero = longV(0)
	case kDouble:
		zero = doubleV(0)
	case kBool:
		zero = falseV
	}
	if zero.k != kNull {
		for i := range a.v {
			a.v[i] = zero
		}
	}
	return a
}

// checkArrayLen fails when a built-in would return too long an array.
func (st *state) checkArrayLen(p int, n int) {
	if n >= st.lim.MaxArrayLength {
		st.fail(p, KindLimit, "array size is over the limit: %d vs length: %d", st.lim.MaxArrayLength, n)
	}
	st.charge(p, 8*int64(n)+16)
}

// run executes the top-level statements and returns the program's value.
func (st *state) run(body []stmt) (v value, pos int, ok bool) {
	for _, s := range body {
		c := s.exec(st)
		if c == ctlReturn {
			return st.ret, s.pos(), true
		}
		ok = c == ctlNormal && yieldsValue(s)
		if ok {
			v, pos = st.last, s.pos()
		}
	}
	return v, pos, ok
}

// yieldsValue reports whether a completed statement leaves a program value:
// an expression statement, or a block ending in one.
func yieldsValue(s stmt) bool {
	switch s := s.(type) {
	case *exprStmt:
		return true
	case *blockStmt:
		return len(s.list) > 0 && yieldsValue(s.list[len(s.list)-1])
	}
	return false
}

// --- statements ---

func (s *exprStmt) exec(st *state) ctl {
	st.last = s.x.eval(st)
	return ctlNormal
}

func (s *emptyStmt) exec(st *state) ctl { return ctlNormal }

func (s *declStmt) exec(st *state) ctl {
	st.tick(s.p)
	for i := range s.vars {
		d := &s.vars[i]
		var v value
		if d.init != nil {
			v = st.coerce(d.p, &s.t, d.init.eval(st), "")
		} else {
			v = st.zeroOf(d.p, &s.t)
		}
		sl := &st.slots[d.slot]
		sl.v, sl.set, sl.t = v, true, &s.t
	}
	return ctlNormal
}

// zeroOf is the value of a declaration without initialiser, as in Maestro:
// 0, 0.0, false, an empty array, or null.
func (st *state) zeroOf(p int, t *typeRef) value {
	if t.array {
		return value{k: kArray, o: st.newArray(p, elemKind(t.base), 0)}
	}
	if t.boxed {
		return nullV
	}
	switch t.base {
	case btLong:
		return longV(0)
	case btDouble:
		return doubleV(0)
	case btBool:
		return falseV
	}
	return nullV
}

func elemKind(b baseType) kind {
	switch b {
	case btLong:
		return kLong
	case btDouble:
		return kDouble
	case btBool:
		return kBool
	}
	return kString
}

func (s *blockStmt) exec(st *state) ctl {
	st.tick(s.p)
	for _, x := range s.list {
		if c := x.exec(st); c != ctlNormal {
			return c
		}
	}
	return ctlNormal
}

func (st *state) cond(e expr) bool {
	v := e.eval(st)
	if v.k != kBool {
		st.fail(e.pos(), KindType, "condition must be a boolean, found %s", v.typeName())
	}
	return v.n != 0
}

func (s *ifStmt) exec(st *state) ctl {
	st.tick(s.p)
	if st.cond(s.cond) {
		return s.then.exec(st)
	}
	if s.els != nil {
		return s.els.exec(st)
	}
	return ctlNormal
}

// loopCheck counts one finished iteration. As in Maestro, reaching the limit
// is an error, so at most MaxLoopIterations-1 iterations run.
func (st *state) loopCheck(p int, n *int) {
	*n++
	if *n >= st.lim.MaxLoopIterations {
		st.fail(p, KindLimit, "loop aborted: the iteration count is over the loop limit %d", st.lim.MaxLoopIterations)
	}
}

func (s *whileStmt) exec(st *state) ctl {
	st.tick(s.p)
	n := 0
	for st.cond(s.cond) {
		switch s.body.exec(st) {
		case ctlBreak:
			return ctlNormal
		case ctlReturn:
			return ctlReturn
		}
		st.loopCheck(s.p, &n)
	}
	return ctlNormal
}

func (s *forStmt) exec(st *state) ctl {
	st.tick(s.p)
	for _, x := range s.init {
		x.exec(st)
	}
	n := 0
	for s.cond == nil || st.cond(s.cond) {
		switch s.body.exec(st) {
		case ctlBreak:
			return ctlNormal
		case ctlReturn:
			return ctlReturn
		}
		for _, u := range s.update {
			u.eval(st)
		}
		st.loopCheck(s.p, &n)
	}
	return ctlNormal
}

func (s *forEachStmt) exec(st *state) ctl {
	st.tick(s.p)
	coll := s.x.eval(st)
	if coll.k != kArray {
		st.fail(s.x.pos(), KindType, "for-each needs an array, found %s", coll.typeName())
	}
	a := coll.arr()
	n := 0
	for i := 0; i < len(a.v); i++ {
		sl := &st.slots[s.slot]
		sl.v, sl.set, sl.t = st.coerce(s.p, &s.t, a.v[i], ""), true, &s.t
		switch s.body.exec(st) {
		case ctlBreak:
			return ctlNormal
		case ctlReturn:
			return ctlReturn
		}
		st.loopCheck(s.p, &n)
	}
	return ctlNormal
}

func (s *breakStmt) exec(st *state) ctl    { st.tick(s.p); return ctlBreak }
func (s *continueStmt) exec(st *state) ctl { st.tick(s.p); return ctlContinue }

func (s *returnStmt) exec(st *state) ctl {
	st.tick(s.p)
	st.ret = nullV
	if s.x != nil {
		st.ret = s.x.eval(st)
	}
	return ctlReturn
}

func (s *throwStmt) exec(st *state) ctl {
	st.tick(s.p)
	v := s.x.eval(st)
	if v.k != kString {
		st.fail(s.x.pos(), KindType, "can only throw a string error message, found %s", v.typeName())
	}
	panic(selPanic{newError(st.prog.src, s.p, KindUserThrow, nil, "%s", v.s)})
}

// --- expressions ---

func (e *litExpr) eval(st *state) value {
	st.tick(e.p)
	return e.v
}

func (e *identExpr) eval(st *state) value {
	st.tick(e.p)
	sl := &st.slots[e.slot]
	if sl.set {
		return sl.v
	}
	return st.loadFree(e.p, e.slot, e.name)
}

// loadFree reads a free name from the Env into its slot. A missing name is
// null, as in Maestro.
func (st *state) loadFree(p, slotIdx int, name string) value {
	v := st.lookup(p, name)
	sl := &st.slots[slotIdx]
	sl.v, sl.set = v, true
	return v
}

func (st *state) lookup(p int, name string) value {
	if st.env == nil {
		return nullV
	}
	x, ok := st.env.Lookup(name)
	if !ok {
		return nullV
	}
	v, err := fromGo(x)
	if err != nil {
		st.failCause(p, KindType, err, "param %s: %v", name, err)
	}
	return v
}

func (e *paramsGetExpr) eval(st *state) value {
	st.tick(e.p)
	k := e.key.eval(st)
	if k.k != kString {
		st.fail(e.key.pos(), KindType, "a param name must be a String, found %s", k.typeName())
	}
	return st.lookup(e.p, k.s)
}

func (e *paramsHasExpr) eval(st *state) value {
	st.tick(e.p)
	k := e.key.eval(st)
	if k.k != kString {
		st.fail(e.key.pos(), KindType, "a param name must be a String, found %s", k.typeName())
	}
	if st.env == nil {
		return falseV
	}
	_, ok := st.env.Lookup(k.s)
	return boolV(ok)
}

func (e *binExpr) eval(st *state) value {
	st.tick(e.p)
	l := e.l.eval(st)
	r := e.r.eval(st)
	if l.k == kLong && r.k == kLong {
		switch e.op {
		case opAdd:
			return longV(l.n + r.n)
		case opSub:
			return longV(l.n - r.n)
		case opMul:
			return longV(l.n * r.n)
		}
		if v, ok := compareOrdered(e.op, l.n, r.n); ok {
			return v
		}
	}
	return st.binary(e.p, e.op, l, r)
}

// compareOrdered applies a comparison operator to two longs or two
// doubles; ok is false for any other operator.
func compareOrdered[T int64 | float64](op opKind, a, b T) (value, bool) {
	switch op {
	case opLt:
		return boolV(a < b), true
	case opGt:
		return boolV(a > b), true
	case opLe:
		return boolV(a <= b), true
	case opGe:
		return boolV(a >= b), true
	case opEq:
		return boolV(a == b), true
	case opNe:
		return boolV(a != b), true
	}
	return value{}, false
}

// binary applies a binary operator with Java's rules: long arithmetic wraps
// and truncates, mixed long/double promotes to double, + concatenates when
// either side is a String.
func (st *state) binary(p int, op opKind, l, r value) value {
	if l.k == kLong && r.k == kLong {
		a, b := l.n, r.n
		switch op {
		case opAdd:
			return longV(a + b)
		case opSub:
			return longV(a - b)
		case opMul:
			return longV(a * b)
		case opDiv:
			if b == 0 {
				st.fail(p, KindRuntime, "ArithmeticException: / by zero")
			}
			return longV(a / b) // Go and Java agree: MinInt64 / -1 == MinInt64
		case opRem:
			if b == 0 {
				st.fail(p, KindRuntime, "ArithmeticException: / by zero")
			}
			return longV(a % b)
		}
		if v, ok := compareOrdered(op, a, b); ok {
			return v
		}
	}
	if isNum(l) && isNum(r) {
		a, b := toF(l), toF(r)
		switch op {
		case opAdd:
			return doubleV(a + b)
		case opSub:
			return doubleV(a - b)
		case opMul:
			return doubleV(a * b)
		case opDiv:
			return doubleV(a / b)
		case opRem:
			return doubleV(math.Mod(a, b))
		}
		if v, ok := compareOrdered(op, a, b); ok {
			return v
		}
	}
	if op == opAdd && (l.k == kString || r.k == kString) {
		ls, rs := javaString(l), javaString(r)
		st.checkStrLen(p, len(ls)+len(rs))
		return strV(ls + rs)
	}
	if op == opEq || op == opNe {
		eq, ok := equalValues(l, r)
		if !ok {
			st.fail(p, KindType, "incomparable types: %s and %s", l.typeName(), r.typeName())
		}
		return boolV(eq == (op == opEq))
	}
	if l.k == kNull || r.k == kNull {
		st.fail(p, KindRuntime, "NullPointerException: operator %s applied to null", op)
	}
	st.fail(p, KindType, "bad operand types for %s: %s and %s", op, l.typeName(), r.typeName())
	return nullV
}

// equalValues implements == for non-numeric pairs. Strings compare by value
// (as Maestro's SEL does); a number compares with a String through its
// string form, also as in Maestro; arrays and maps compare by identity.
func equalValues(l, r value) (eq, ok bool) {
	if l.k == kNull || r.k == kNull {
		return l.k == r.k, true
	}
	switch {
	case l.k == kString && r.k == kString:
		return l.s == r.s, true
	case l.k == kBool && r.k == kBool:
		return l.n == r.n, true
	case (isNum(l) && r.k == kString) || (l.k == kString && isNum(r)):
		return javaString(l) == javaString(r), true
	case l.k != r.k:
		return false, false
	case l.k == kArray || l.k == kMap || l.k == kZone || l.k == kFormatter || l.k == kProperty:
		return l.o == r.o, true
	case l.k == kDateTime:
		return l.n == r.n && l.o == r.o, true
	case l.k == kDays:
		return l.n == r.n, true
	case l.k == kUUID:
		return l.s == r.s, true
	}
	return false, false
}

func isNum(v value) bool { return v.k == kLong || v.k == kDouble }

func toF(v value) float64 {
	if v.k == kLong {
		return float64(v.n)
	}
	return v.f
}

func (e *logicExpr) eval(st *state) value {
	st.tick(e.p)
	l := e.l.eval(st)
	if l.k != kBool {
		st.fail(e.l.pos(), KindType, "bad operand type %s for %s", l.typeName(), logicName(e.and))
	}
	if e.and != (l.n != 0) { // false && x, true || x: short-circuit
		return l
	}
	r := e.r.eval(st)
	if r.k != kBool {
		st.fail(e.r.pos(), KindType, "bad operand type %s for %s", r.typeName(), logicName(e.and))
	}
	return r
}

func logicName(and bool) string {
	if and {
		return "&&"
	}
	return "||"
}

func (e *unaryExpr) eval(st *state) value {
	st.tick(e.p)
	v := e.x.eval(st)
	switch {
	case e.op == opNot && v.k == kBool:
		return boolV(v.n == 0)
	case e.op == opNeg && v.k == kLong:
		return longV(-v.n)
	case e.op == opNeg && v.k == kDouble:
		return doubleV(-v.f)
	case e.op == opPlus && isNum(v):
		return v
	}
	st.fail(e.p, KindType, "bad operand type %s for unary %s", v.typeName(), e.op)
	return nullV
}

func (e *condExpr) eval(st *state) value {
	st.tick(e.p)
	if st.cond(e.c) {
		return e.a.eval(st)
	}
	return e.b.eval(st)
}

func (e *assignExpr) eval(st *state) value {
	st.tick(e.p)
	switch t := e.target.(type) {
	case *identExpr:
		sl := &st.slots[t.slot]
		if e.op == opNone {
			v := e.val.eval(st)
			if sl.t != nil {
				v = st.coerce(e.p, sl.t, v, t.name)
			}
			sl = &st.slots[t.slot]
			sl.v, sl.set = v, true
			return v
		}
		cur := t.eval(st)
		rhs := e.val.eval(st)
		v := st.compound(e.p, e.op, cur, rhs, st.slots[t.slot].t)
		sl = &st.slots[t.slot]
		sl.v, sl.set = v, true
		return v
	case *indexExpr:
		return st.assignIndex(e, t)
	}
	st.fail(e.p, KindSyntax, "invalid assignment target")
	return nullV
}

// compound computes `cur op rhs` for op= and casts the result back to the
// variable's type as Java does (`long x; x += 1.5` truncates).
func (st *state) compound(p int, op opKind, cur, rhs value, t *typeRef) value {
	res := st.binary(p, op, cur, rhs)
	target := cur.k
	if t != nil {
		switch t.base {
		case btLong:
			target = kLong
		case btDouble:
			target = kDouble
		}
	}
	if target == kLong && res.k == kDouble {
		return longV(d2l(res.f))
	}
	if t != nil {
		return st.coerce(p, t, res, "")
	}
	return res
}

func (st *state) assignIndex(e *assignExpr, t *indexExpr) value {
	container := t.x.eval(st)
	idx := t.idx.eval(st)
	switch container.k {
	case kArray:
		a := container.arr()
		i := st.arrayIndex(t.p, a, idx)
		v := e.val.eval(st)
		if e.op != opNone {
			v = st.compound(e.p, e.op, a.v[i], v, nil)
		}
		a.v[i] = st.coerceElem(e.p, a.elem, v)
		return a.v[i]
	case kMap:
		if idx.k != kString {
			st.fail(t.idx.pos(), KindType, "a Map key must be a String, found %s", idx.typeName())
		}
		m := container.mp()
		v := e.val.eval(st)
		if e.op != opNone {
			old, ok := m.m[idx.s]
			if !ok {
				old = nullV
			}
			v = st.compound(e.p, e.op, old, v, nil)
		}
		if _, ok := m.m[idx.s]; !ok {
			st.charge(e.p, int64(len(idx.s))+64)
		}
		m.m[idx.s] = v
		return v
	case kNull:
		st.fail(t.p, KindRuntime, "NullPointerException: cannot store into a null array")
	}
	st.fail(t.p, KindType, "cannot index a %s", container.typeName())
	return nullV
}

// arrayIndex checks an index value against a's bounds.
func (st *state) arrayIndex(p int, a *array, idx value) int {
	if idx.k != kLong {
		st.fail(p, KindType, "an array index must be an integer, found %s", idx.typeName())
	}
	if idx.n < 0 || idx.n >= int64(len(a.v)) {
		st.fail(p, KindRuntime, "ArrayIndexOutOfBoundsException: Index %d out of bounds for length %d", idx.n, len(a.v))
	}
	return int(idx.n)
}

func (e *incDecExpr) eval(st *state) value {
	st.tick(e.p)
	var old value
	var store func(value)
	switch t := e.target.(type) {
	case *identExpr:
		old = t.eval(st)
		store = func(v value) {
			sl := &st.slots[t.slot]
			sl.v, sl.set = v, true
		}
	case *indexExpr:
		c := t.x.eval(st)
		if c.k != kArray {
			st.fail(t.p, KindType, "cannot index a %s", c.typeName())
		}
		a := c.arr()
		i := st.arrayIndex(t.p, a, t.idx.eval(st))
		old = a.v[i]
		store = func(v value) { a.v[i] = v }
	}
	var nv value
	switch old.k {
	case kLong:
		nv = longV(old.n + e.delta)
	case kDouble:
		nv = doubleV(old.f + float64(e.delta))
	default:
		st.fail(e.p, KindType, "bad operand type %s for ++/--", old.typeName())
	}
	store(nv)
	if e.prefix {
		return nv
	}
	return old
}

// coerce converts v for storage in a variable of declared type t, with
// Java's assignment conversions (long widens to double, nothing narrows).
func (st *state) coerce(p int, t *typeRef, v value, name string) value {
	if out, ok := assignable(t, v); ok {
		return out
	}
	switch {
	case v.k == kNull:
		st.fail(p, KindType, "incompatible types: null cannot be converted to %s", t)
	case v.k == kDouble && t.base == btLong && !t.array:
		st.fail(p, KindType, "incompatible types: possible lossy conversion from double to %s", t)
	}
	st.fail(p, KindType, "incompatible types: %s cannot be converted to %s", v.typeName(), t)
	return nullV
}

// assignable reports whether v can be stored in a variable of type t, and
// returns it converted (long to double).
func assignable(t *typeRef, v value) (value, bool) {
	if t.base == btDynamic && !t.array {
		return v, true
	}
	if v.k == kNull {
		if t.array || t.boxed {
			return v, true
		}
		switch t.base {
		case btLong, btDouble, btBool:
			return v, false
		}
		return v, true
	}
	if t.array {
		return v, v.k == kArray && v.arr().elem == elemKind(t.base)
	}
	if t.base == btDouble && v.k == kLong {
		return doubleV(float64(v.n)), true
	}
	k, ok := scalarKind[t.base]
	return v, ok && v.k == k
}

// scalarKind is the kind of value a variable of each (non-array) base
// type holds.
var scalarKind = map[baseType]kind{
	btLong: kLong, btDouble: kDouble, btBool: kBool, btString: kString, btMap: kMap,
	btDateTime: kDateTime, btZone: kZone, btFormatter: kFormatter, btProperty: kProperty,
	btDays: kDays, btUUID: kUUID,
}

// coerceElem converts v for storage in an array with element kind elem.
func (st *state) coerceElem(p int, elem kind, v value) value {
	switch {
	case v.k == elem:
		return v
	case elem == kDouble && v.k == kLong:
		return doubleV(float64(v.n))
	case elem == kString && v.k == kNull:
		return v
	}
	st.fail(p, KindType, "incompatible types: %s cannot be stored in a %s array", v.typeName(), elemTypeName(elem))
	return nullV
}

func (e *castExpr) eval(st *state) value {
	st.tick(e.p)
	v := e.x.eval(st)
	t := &e.t
	if t.array || t.base == btDynamic {
		if t.array && v.k != kNull && !(v.k == kArray && v.arr().elem == elemKind(t.base)) {
			st.classCast(e.p, v, t)
		}
		return v
	}
	if v.k == kNull {
		if t.boxed || (t.base != btLong && t.base != btDouble && t.base != btBool) {
			return v
		}
		st.fail(e.p, KindRuntime, "NullPointerException: cannot cast null to %s", t)
	}
	switch t.base {
	case btLong:
		switch v.k {
		case kLong:
			if t.int32 && !t.boxed {
				return longV(int64(int32(v.n)))
			}
			return v
		case kDouble:
			if t.boxed {
				st.classCast(e.p, v, t)
			}
			if t.int32 {
				return longV(d2i(v.f))
			}
			return longV(d2l(v.f))
		}
	case btDouble:
		switch v.k {
		case kLong:
			f := float64(v.n)
			if t.f32 {
				f = float64(float32(f))
			}
			return doubleV(f)
		case kDouble:
			if t.f32 && !t.boxed {
				return doubleV(float64(float32(v.f)))
			}
			return v
		}
	default:
		return st.coerceRef(e.p, v, t)
	}
	st.classCast(e.p, v, t)
	return nullV
}

func (st *state) coerceRef(p int, v value, t *typeRef) value {
	out, ok := assignable(t, v)
	if !ok {
		st.classCast(p, v, t)
	}
	return out
}

func (st *state) classCast(p int, v value, t *typeRef) {
	st.fail(p, KindRuntime, "ClassCastException: %s cannot be cast to %s", v.typeName(), t)
}

// d2l is Java's double-to-long conversion: NaN is 0, out-of-range values
// saturate.
func d2l(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= 9.223372036854775807e18:
		return math.MaxInt64
	case f <= -9.223372036854775808e18:
		return math.MinInt64
	}
	return int64(f)
}

// d2i is Java's double-to-int conversion.
func d2i(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	case f <= math.MinInt32:
		return math.MinInt32
	}
	return int64(int32(f))
}

func (e *fieldExpr) eval(st *state) value {
	st.tick(e.p)
	v := e.recv.eval(st)
	switch v.k {
	case kArray:
		return longV(int64(len(v.arr().v)))
	case kNull:
		st.fail(e.p, KindRuntime, "NullPointerException: cannot read the array length because the value is null")
	}
	st.fail(e.p, KindType, "%s has no field %s", v.typeName(), e.name)
	return nullV
}

func (e *indexExpr) eval(st *state) value {
	st.tick(e.p)
	c := e.x.eval(st)
	idx := e.idx.eval(st)
	switch c.k {
	case kArray:
		a := c.arr()
		return a.v[st.arrayIndex(e.p, a, idx)]
	case kMap:
		if idx.k != kString {
			st.fail(e.idx.pos(), KindType, "a Map key must be a String, found %s", idx.typeName())
		}
		if v, ok := c.mp().m[idx.s]; ok {
			return v
		}
		return nullV
	case kNull:
		st.fail(e.p, KindRuntime, "NullPointerException: cannot index null")
	}
	st.fail(e.p, KindType, "cannot index a %s", c.typeName())
	return nullV
}

func (e *newArrayExpr) eval(st *state) value {
	st.tick(e.p)
	elem := elemKind(e.t.base)
	if !e.hasInit {
		n := e.size.eval(st)
		if n.k != kLong {
			st.fail(e.size.pos(), KindType, "an array size must be an integer, found %s", n.typeName())
		}
		return value{k: kArray, o: st.newArray(e.p, elem, n.n)}
	}
	a := st.newArray(e.p, elem, int64(len(e.init)))
	for i, x := range e.init {
		a.v[i] = st.coerceElem(x.pos(), elem, x.eval(st))
	}
	return value{k: kArray, o: a}
}

func (e *newExpr) eval(st *state) value {
	st.tick(e.p)
	return e.ctor(st, e.p, st.evalArgs(e.args))
}

func (st *state) evalArgs(list []expr) []value {
	if len(list) == 0 {
		return nil
	}
	args := make([]value, len(list))
	for i, x := range list {
		args[i] = x.eval(st)
	}
	return args
}

func (e *callExpr) eval(st *state) value {
	st.tick(e.p)
	switch {
	case e.static != nil:
		return e.static(st, e.p, st.evalArgs(e.args))
	case e.ext != nil:
		return st.callExt(e, st.evalArgs(e.args))
	case e.unres != "":
		st.fail(e.p, KindType, "%s", e.unres)
	}
	recv := e.recv.eval(st)
	args := st.evalArgs(e.args)
	return st.callMethod(e, recv, args)
}

// callExt calls an extension function, converting values both ways and
// turning its error or panic into a positioned *Error.
func (st *state) callExt(e *callExpr, args []value) (out value) {
	goArgs := make([]any, len(args))
	for i, a := range args {
		g, err := toGo(a, false)
		if err != nil {
			st.failCause(e.p, KindType, err, "%s argument %d: %v", e.extKey, i+1, err)
		}
		goArgs[i] = g
	}
	res, err := func() (res any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%s panicked: %v", e.extKey, r)
			}
		}()
		return e.ext(st.ctx, goArgs)
	}()
	if err != nil {
		var se *Error
		if errors.As(err, &se) && se.Kind == KindUserThrow {
			st.failCause(e.p, KindUserThrow, err, "%s", se.Message)
		}
		st.failCause(e.p, KindRuntime, err, "%s: %v", e.extKey, err)
	}
	v, cerr := fromGo(res)
	if cerr != nil {
		st.failCause(e.p, KindType, cerr, "%s returned %v", e.extKey, cerr)
	}
	return v
}

// callMethod dispatches an instance method on the receiver's runtime type.
func (st *state) callMethod(e *callExpr, recv value, args []value) value {
	switch recv.k {
	case kString:
		return st.stringMethod(e, recv.s, args)
	case kLong, kDouble, kBool:
		return st.numberMethod(e, recv, args)
	case kArray:
		return st.arrayMethod(e, recv, args)
	case kMap:
		return st.mapMethod(e, recv, args)
	case kDateTime:
		return st.dateTimeMethod(e, recv, args)
	case kZone:
		return st.zoneMethod(e, recv, args)
	case kFormatter:
		return st.formatterMethod(e, recv, args)
	case kProperty:
		return st.propertyMethod(e, recv, args)
	case kDays:
		return st.daysMethod(e, recv, args)
	case kUUID:
		if e.name == "toString" && len(args) == 0 {
			return strV(recv.s)
		}
		if e.name == "equals" && len(args) == 1 {
			return boolV(args[0].k == kUUID && args[0].s == recv.s)
		}
	case kNull:
		st.fail(e.p, KindRuntime, "NullPointerException: cannot invoke %s() because the value is null", e.name)
	}
	st.noMethod(e, recv, args)
	return nullV
}

func (st *state) noMethod(e *callExpr, recv value, args []value) {
	st.fail(e.p, KindType, "%s has no method %s with %d argument(s)", recv.typeName(), e.name, len(args))
}

func kindName(k kind) string {
	return value{k: k, o: &array{elem: kString}}.typeName()
}

// intArg reads an int argument (Java int parameters reject long values
// outside the int range).
func (st *state) intArg(p int, v value, what string) int {
	if v.k != kLong {
		st.fail(p, KindType, "%s must be an integer, found %s", what, v.typeName())
	}
	if v.n < math.MinInt32 || v.n > math.MaxInt32 {
		st.fail(p, KindRuntime, "%s %d is out of the int range", what, v.n)
	}
	return int(v.n)
}

func (st *state) numberMethod(e *callExpr, recv value, args []value) value {
	switch e.name {
	case "toString":
		if len(args) == 0 {
			return strV(javaString(recv))
		}
	case "equals":
		if len(args) == 1 {
			return boolV(args[0].k == recv.k && args[0].n == recv.n && (recv.k != kDouble || args[0].f == recv.f))
		}
	case "intValue", "longValue":
		if len(args) == 0 && isNum(recv) {
			if recv.k == kDouble {
				return longV(d2l(recv.f))
			}
			return recv
		}
	case "doubleValue":
		if len(args) == 0 && isNum(recv) {
			return doubleV(toF(recv))
		}
	case "booleanValue":
		if len(args) == 0 && recv.k == kBool {
			return recv
		}
	case "compareTo":
		if len(args) == 1 && args[0].k == recv.k {
			a, b := toF(recv), toF(args[0])
			if recv.k == kLong {
				a, b = 0, 0
				if recv.n < args[0].n {
					a = -1
				} else if recv.n > args[0].n {
					a = 1
				}
			}
			switch {
			case a < b:
				return longV(-1)
			case a > b:
				return longV(1)
			}
			return longV(0)
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}
