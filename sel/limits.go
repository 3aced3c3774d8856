package sel

// Limits bounds what one expression may cost. Every limit is exclusive, as in
// Maestro: a value equal to the limit is already over it (a loop may run
// MaxLoopIterations-1 iterations, an array may hold MaxArrayLength-1
// elements). Zero or negative fields take the default.
type Limits struct {
	// MaxSourceLength bounds the expression's length in characters.
	MaxSourceLength int
	// MaxLoopIterations bounds the iterations of one execution of a loop.
	MaxLoopIterations int
	// MaxArrayLength bounds the length of every array created or returned by
	// a built-in.
	MaxArrayLength int
	// MaxStringLength bounds the length in bytes of every string produced.
	MaxStringLength int
	// MaxStackDepth bounds the syntactic nesting depth (parentheses, blocks,
	// unary chains, nested calls) checked while parsing.
	MaxStackDepth int
	// MaxVisits bounds the number of AST nodes evaluated in one Eval.
	MaxVisits int64
	// MaxMemoryBytes bounds the bytes allocated by strings, arrays, maps and
	// objects in one Eval (a running total, not a live-heap measure).
	MaxMemoryBytes int64
}

// Default limit values. The first six are Maestro's SEL defaults.
const (
	DefaultMaxSourceLength   = 10_000
	DefaultMaxLoopIterations = 25_001
	DefaultMaxArrayLength    = 25_001
	DefaultMaxStackDepth     = 128
	DefaultMaxVisits         = 100_000_000
	DefaultMaxMemoryBytes    = 100_000_000
	// DefaultMaxStringLength is 1 MiB; Maestro has no such limit of its own
	// and relies on its memory limit.
	DefaultMaxStringLength = 1 << 20
)

// DefaultLimits returns Maestro's defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxSourceLength:   DefaultMaxSourceLength,
		MaxLoopIterations: DefaultMaxLoopIterations,
		MaxArrayLength:    DefaultMaxArrayLength,
		MaxStringLength:   DefaultMaxStringLength,
		MaxStackDepth:     DefaultMaxStackDepth,
		MaxVisits:         DefaultMaxVisits,
		MaxMemoryBytes:    DefaultMaxMemoryBytes,
	}
}

// withDefaults fills zero or negative fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxSourceLength <= 0 {
		l.MaxSourceLength = d.MaxSourceLength
	}
	if l.MaxLoopIterations <= 0 {
		l.MaxLoopIterations = d.MaxLoopIterations
	}
	if l.MaxArrayLength <= 0 {
		l.MaxArrayLength = d.MaxArrayLength
	}
	if l.MaxStringLength <= 0 {
		l.MaxStringLength = d.MaxStringLength
	}
	if l.MaxStackDepth <= 0 {
		l.MaxStackDepth = d.MaxStackDepth
	}
	if l.MaxVisits <= 0 {
		l.MaxVisits = d.MaxVisits
	}
	if l.MaxMemoryBytes <= 0 {
		l.MaxMemoryBytes = d.MaxMemoryBytes
	}
	return l
}
