package workflow

import "strings"

// ParamType is the declared type of a parameter.
type ParamType string

// Parameter types, as in Maestro.
const (
	ParamTypeString       ParamType = "STRING"
	ParamTypeLong         ParamType = "LONG"
	ParamTypeDouble       ParamType = "DOUBLE"
	ParamTypeBoolean      ParamType = "BOOLEAN"
	ParamTypeStringMap    ParamType = "STRING_MAP"
	ParamTypeStringArray  ParamType = "STRING_ARRAY"
	ParamTypeLongArray    ParamType = "LONG_ARRAY"
	ParamTypeDoubleArray  ParamType = "DOUBLE_ARRAY"
	ParamTypeBooleanArray ParamType = "BOOLEAN_ARRAY"
	ParamTypeMap          ParamType = "MAP"
)

// ParamTypes lists every parameter type.
func ParamTypes() []ParamType {
	return []ParamType{
		ParamTypeString, ParamTypeLong, ParamTypeDouble, ParamTypeBoolean, ParamTypeStringMap,
		ParamTypeStringArray, ParamTypeLongArray, ParamTypeDoubleArray, ParamTypeBooleanArray, ParamTypeMap,
	}
}

// Valid reports whether t is a known parameter type.
func (t ParamType) Valid() bool {
	switch t {
	case ParamTypeString, ParamTypeLong, ParamTypeDouble, ParamTypeBoolean, ParamTypeStringMap,
		ParamTypeStringArray, ParamTypeLongArray, ParamTypeDoubleArray, ParamTypeBooleanArray, ParamTypeMap:
		return true
	}
	return false
}

// IsArray reports whether t is one of the *_ARRAY types.
func (t ParamType) IsArray() bool {
	switch t {
	case ParamTypeStringArray, ParamTypeLongArray, ParamTypeDoubleArray, ParamTypeBooleanArray:
		return true
	}
	return false
}

// Elem returns the element type of an array type, or "" for other types.
func (t ParamType) Elem() ParamType {
	switch t {
	case ParamTypeStringArray:
		return ParamTypeString
	case ParamTypeLongArray:
		return ParamTypeLong
	case ParamTypeDoubleArray:
		return ParamTypeDouble
	case ParamTypeBooleanArray:
		return ParamTypeBoolean
	}
	return ""
}

func (t *ParamType) normalize() { *t = ParamType(strings.ToUpper(string(*t))) }

// ParamMode says who may change a parameter and when.
type ParamMode string

// Parameter modes, as in Maestro. An unset mode means MUTABLE.
const (
	ParamModeConstant              ParamMode = "CONSTANT"
	ParamModeImmutable             ParamMode = "IMMUTABLE"
	ParamModeMutable               ParamMode = "MUTABLE"
	ParamModeMutableOnStart        ParamMode = "MUTABLE_ON_START"
	ParamModeMutableOnStartRestart ParamMode = "MUTABLE_ON_START_RESTART"
)

// DefaultParamMode applies when a parameter sets no mode.
const DefaultParamMode = ParamModeMutable

// Valid reports whether m is a known mode.
func (m ParamMode) Valid() bool {
	switch m {
	case ParamModeConstant, ParamModeImmutable, ParamModeMutable, ParamModeMutableOnStart, ParamModeMutableOnStartRestart:
		return true
	}
	return false
}

func (m *ParamMode) normalize() { *m = ParamMode(strings.ToUpper(string(*m))) }

// FailureMode decides what a step failure does to the rest of the workflow.
type FailureMode string

// Failure modes, as in Maestro. An unset mode means FAIL_AFTER_RUNNING.
const (
	FailureModeFailAfterRunning FailureMode = "FAIL_AFTER_RUNNING"
	FailureModeFailImmediately  FailureMode = "FAIL_IMMEDIATELY"
	FailureModeIgnoreFailure    FailureMode = "IGNORE_FAILURE"
)

// DefaultFailureMode applies when a step sets no failure mode.
const DefaultFailureMode = FailureModeFailAfterRunning

// Valid reports whether m is a known failure mode.
func (m FailureMode) Valid() bool {
	switch m {
	case FailureModeFailAfterRunning, FailureModeFailImmediately, FailureModeIgnoreFailure:
		return true
	}
	return false
}

func (m *FailureMode) normalize() { *m = FailureMode(strings.ToUpper(string(*m))) }

// RunStrategyRule decides how instances of one workflow are queued against each other.
type RunStrategyRule string

// Run strategy rules, as in Maestro. An unset strategy means SEQUENTIAL.
const (
	RunStrategySequential       RunStrategyRule = "SEQUENTIAL"
	RunStrategyStrictSequential RunStrategyRule = "STRICT_SEQUENTIAL"
	RunStrategyFirstOnly        RunStrategyRule = "FIRST_ONLY"
	RunStrategyLastOnly         RunStrategyRule = "LAST_ONLY"
	RunStrategyParallel         RunStrategyRule = "PARALLEL"
)

// Valid reports whether r is a known rule.
func (r RunStrategyRule) Valid() bool {
	switch r {
	case RunStrategySequential, RunStrategyStrictSequential, RunStrategyFirstOnly, RunStrategyLastOnly, RunStrategyParallel:
		return true
	}
	return false
}

func (r *RunStrategyRule) normalize() { *r = RunStrategyRule(strings.ToUpper(string(*r))) }

// Criticality ranks a workflow for prioritisation.
type Criticality string

// Criticality levels, as in Maestro.
const (
	CriticalityCritical Criticality = "CRITICAL"
	CriticalityHigh     Criticality = "HIGH"
	CriticalityMedium   Criticality = "MEDIUM"
	CriticalityLow      Criticality = "LOW"
)

// Valid reports whether c is a known level.
func (c Criticality) Valid() bool {
	switch c {
	case CriticalityCritical, CriticalityHigh, CriticalityMedium, CriticalityLow:
		return true
	}
	return false
}

func (c *Criticality) normalize() { *c = Criticality(strings.ToUpper(string(*c))) }

// BackoffType selects how retry delays grow.
type BackoffType string

// Backoff types, as in Maestro.
const (
	BackoffFixed       BackoffType = "FIXED_BACKOFF"
	BackoffExponential BackoffType = "EXPONENTIAL_BACKOFF"
)

// Valid reports whether t is a known backoff type.
func (t BackoffType) Valid() bool { return t == BackoffFixed || t == BackoffExponential }

func (t *BackoffType) normalize() { *t = BackoffType(strings.ToUpper(string(*t))) }

// TagNamespace says who defined a tag.
type TagNamespace string

// Tag namespaces, as in Maestro.
const (
	TagNamespaceSystem           TagNamespace = "SYSTEM"
	TagNamespaceRuntime          TagNamespace = "RUNTIME"
	TagNamespaceJobTemplate      TagNamespace = "JOB_TEMPLATE"
	TagNamespaceNotebookTemplate TagNamespace = "NOTEBOOK_TEMPLATE"
	TagNamespaceUserDefined      TagNamespace = "USER_DEFINED"
	TagNamespacePlatform         TagNamespace = "PLATFORM"
)

// Valid reports whether ns is a known namespace.
func (ns TagNamespace) Valid() bool {
	switch ns {
	case TagNamespaceSystem, TagNamespaceRuntime, TagNamespaceJobTemplate, TagNamespaceNotebookTemplate,
		TagNamespaceUserDefined, TagNamespacePlatform:
		return true
	}
	return false
}

func (ns *TagNamespace) normalize() { *ns = TagNamespace(strings.ToUpper(string(*ns))) }

// TimeTriggerType selects the kind of schedule.
type TimeTriggerType string

// Time trigger types, as in Maestro.
const (
	TimeTriggerCron       TimeTriggerType = "CRON"
	TimeTriggerInterval   TimeTriggerType = "INTERVAL"
	TimeTriggerPredefined TimeTriggerType = "PREDEFINED"
)

// Valid reports whether t is a known trigger type.
func (t TimeTriggerType) Valid() bool {
	return t == TimeTriggerCron || t == TimeTriggerInterval || t == TimeTriggerPredefined
}

func (t *TimeTriggerType) normalize() { *t = TimeTriggerType(strings.ToUpper(string(*t))) }

// SignalOperator compares a signal parameter with a wanted value.
type SignalOperator string

// Signal operators, as in Maestro.
const (
	SignalEquals        SignalOperator = "="
	SignalGreater       SignalOperator = ">"
	SignalGreaterEquals SignalOperator = ">="
	SignalLess          SignalOperator = "<"
	SignalLessEquals    SignalOperator = "<="
)

// Valid reports whether op is a known operator.
func (op SignalOperator) Valid() bool {
	switch op {
	case SignalEquals, SignalGreater, SignalGreaterEquals, SignalLess, SignalLessEquals:
		return true
	}
	return false
}

// StepKind names the wrapper a step node uses.
type StepKind string

// Step kinds: the keys of the step wrapper object.
const (
	StepKindStep        StepKind = "step"
	StepKindSubworkflow StepKind = "subworkflow"
	StepKindForeach     StepKind = "foreach"
	StepKindWhile       StepKind = "while"
)

// StepType is the runtime type of a typed ({"step": ...}) step. The set is open: the validator
// accepts the types it is configured with.
type StepType string

// Step types of the step-type table (steptypes.go). Notebook, Kubernetes
// and Titus are Maestro's; a definition keeps their spelling, and the
// validator refuses them (no runtime here).
const (
	StepTypeNoOp       StepType = "NoOp"
	StepTypeSleep      StepType = "Sleep"
	StepTypeTitus      StepType = "Titus"
	StepTypeNotebook   StepType = "Notebook"
	StepTypeKubernetes StepType = "Kubernetes"
	StepTypeLambda     StepType = "Lambda"
	StepTypeHTTP       StepType = "Http"
	StepTypeEcsTask    StepType = "EcsTask"
	// Batch and Emr run jobs on AWS Batch and EMR ([aws-steps]).
	StepTypeBatch StepType = "Batch"
	StepTypeEmr   StepType = "Emr"
)

// AWS job step types (engine/stepruntime/awsjob).
const (
	StepTypeAthena        StepType = "Athena"
	StepTypeGlue          StepType = "Glue"
	StepTypeStepFunctions StepType = "StepFunctions"
)

// normalize gives the table's types their canonical spelling; Maestro matches types
// case-insensitively. Other types are kept as written.
func (t *StepType) normalize() {
	for _, known := range stepTypeTable {
		if strings.EqualFold(string(*t), string(known.Type)) {
			*t = known.Type
			return
		}
	}
}
