package sel

// expr is an expression node. Positions are byte offsets into the source.
// The parser builds the tree; check resolves names and calls in place; the
// eval methods (eval.go) walk it.
type expr interface {
	pos() int
	eval(st *state) value
}

// stmt is a statement node.
type stmt interface {
	pos() int
	exec(st *state) ctl
}

// ctl is how a statement completed.
type ctl uint8

const (
	ctlNormal ctl = iota
	ctlBreak
	ctlContinue
	ctlReturn
)

// opKind is a unary, binary or compound-assignment operator.
type opKind uint8

const (
	opNone opKind = iota
	opAdd
	opSub
	opMul
	opDiv
	opRem
	opEq
	opNe
	opLt
	opGt
	opLe
	opGe
	opNeg
	opPlus
	opNot
	opAnd
	opOr
)

var opNames = [...]string{
	opNone: "=", opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opRem: "%",
	opEq: "==", opNe: "!=", opLt: "<", opGt: ">", opLe: "<=", opGe: ">=",
	opNeg: "-", opPlus: "+", opNot: "!", opAnd: "&&", opOr: "||",
}

func (o opKind) String() string { return opNames[o] }

// baseType is the element or scalar type named in a declaration or cast.
type baseType uint8

const (
	btDynamic baseType = iota // Object, or a variable never declared
	btLong
	btDouble
	btBool
	btString
	btMap
	btDateTime
	btZone
	btFormatter
	btProperty
	btDays
	btUUID
)

// typeRef is a type as written in a declaration, cast or allocation.
type typeRef struct {
	name  string // spelling, for messages
	base  baseType
	array bool
	boxed bool // Long, Integer, Double, Boolean: may hold null
	int32 bool // int or Integer: a cast narrows to 32 bits
	f32   bool // float or Float: a cast rounds to float precision
}

func (t typeRef) String() string {
	if t.array {
		return t.name + "[]"
	}
	return t.name
}

// Expressions.
type (
	litExpr struct {
		p int
		v value
	}
	identExpr struct {
		p    int
		name string
		slot int
	}
	binExpr struct {
		p    int
		op   opKind
		l, r expr
	}
	logicExpr struct {
		p    int
		and  bool
		l, r expr
	}
	unaryExpr struct {
		p  int
		op opKind
		x  expr
	}
	condExpr struct {
		p       int
		c, a, b expr
	}
	// assignExpr is `target = val` (op == opNone) or `target op= val`.
	assignExpr struct {
		p      int
		op     opKind
		target expr // *identExpr or *indexExpr
		val    expr
	}
	incDecExpr struct {
		p      int
		target expr
		delta  int64
		prefix bool
	}
	castExpr struct {
		p int
		t typeRef
		x expr
	}
	// callExpr is `recv.name(args)`, `Class.name(args)` or `name(args)`.
	callExpr struct {
		p        int
		recv     expr   // receiver expression; nil for static and bare calls
		recvName string // receiver identifier as written, if it was one
		name     string
		args     []expr

		// Filled by check.
		static staticFn
		ext    Func
		extKey string
		re     *javaRegex // first argument precompiled when a literal
		unres  string     // set when the call cannot be resolved: error at run time
	}
	// fieldExpr is `recv.name` without arguments (array length).
	fieldExpr struct {
		p    int
		recv expr
		name string
	}
	indexExpr struct {
		p      int
		x, idx expr
	}
	paramsGetExpr struct {
		p   int
		key expr
	}
	paramsHasExpr struct {
		p   int
		key expr
	}
	newExpr struct {
		p    int
		t    typeRef
		args []expr
		ctor staticFn
	}
	newArrayExpr struct {
		p       int
		t       typeRef // element type
		size    expr
		init    []expr
		hasInit bool
	}
)

// Statements.
type (
	exprStmt struct {
		p int
		x expr
	}
	declVar struct {
		p    int
		name string
		slot int
		init expr
	}
	declStmt struct {
		p    int
		t    typeRef
		vars []declVar
	}
	blockStmt struct {
		p    int
		list []stmt
	}
	ifStmt struct {
		p         int
		cond      expr
		then, els stmt
	}
	whileStmt struct {
		p    int
		cond expr
		body stmt
	}
	forStmt struct {
		p      int
		init   []stmt
		cond   expr
		update []expr
		body   stmt
	}
	forEachStmt struct {
		p    int
		t    typeRef
		name string
		slot int
		x    expr
		body stmt
	}
	breakStmt    struct{ p int }
	continueStmt struct{ p int }
	returnStmt   struct {
		p int
		x expr
	}
	throwStmt struct {
		p int
		x expr
	}
	emptyStmt struct{ p int }
)

func (e *litExpr) pos() int       { return e.p }
func (e *identExpr) pos() int     { return e.p }
func (e *binExpr) pos() int       { return e.p }
func (e *logicExpr) pos() int     { return e.p }
func (e *unaryExpr) pos() int     { return e.p }
func (e *condExpr) pos() int      { return e.p }
func (e *assignExpr) pos() int    { return e.p }
func (e *incDecExpr) pos() int    { return e.p }
func (e *castExpr) pos() int      { return e.p }
func (e *callExpr) pos() int      { return e.p }
func (e *fieldExpr) pos() int     { return e.p }
func (e *indexExpr) pos() int     { return e.p }
func (e *paramsGetExpr) pos() int { return e.p }
func (e *paramsHasExpr) pos() int { return e.p }
func (e *newExpr) pos() int       { return e.p }
func (e *newArrayExpr) pos() int  { return e.p }

func (s *exprStmt) pos() int     { return s.p }
func (s *declStmt) pos() int     { return s.p }
func (s *blockStmt) pos() int    { return s.p }
func (s *ifStmt) pos() int       { return s.p }
func (s *whileStmt) pos() int    { return s.p }
func (s *forStmt) pos() int      { return s.p }
func (s *forEachStmt) pos() int  { return s.p }
func (s *breakStmt) pos() int    { return s.p }
func (s *continueStmt) pos() int { return s.p }
func (s *returnStmt) pos() int   { return s.p }
func (s *throwStmt) pos() int    { return s.p }
func (s *emptyStmt) pos() int    { return s.p }
