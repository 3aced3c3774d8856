package workflow

// The step-type table: every typed-step type the model layer knows, with
// what validation needs of it. It is the one list of step types: the
// validator's defaults, the spelling a definition's types are normalized
// to, the job templates' types and the params each type's job needs all
// derive from it, and engine/stepruntime/registry's runtimes must cover
// exactly its runnable types (a test there holds it). Adding a step type
// is its runtime package, one line in registry.New, and one row here.

// StepTypeSpec is what the model layer knows of one step type.
type StepTypeSpec struct {
	// Type is the canonical spelling; Maestro matches types
	// case-insensitively.
	Type StepType
	// Instead is set for a Maestro step type this deployment has no
	// runtime for: what to use instead. A definition using one is refused
	// when it is pushed, not when it runs.
	Instead string
	// Config are the type-specific fields its steps may carry and how to
	// check each (nil accepts any value).
	Config map[string]ConfigCheck
	// JobParam names the MAP param holding the step's job and JobFields
	// the fields that MAP must have (Maestro's REQUIRED internal mode). A
	// step without the param, or with a literal one that lacks a field,
	// is refused when it is pushed.
	JobParam  string
	JobFields []string
	// JobParamStringMap accepts a STRING_MAP job param besides a MAP (the
	// YAML DSL writes a plain map as one: Maestro's notebook blocks).
	JobParamStringMap bool
}

// Runs reports whether this deployment has a runtime for the type.
func (s StepTypeSpec) Runs() bool { return s.Instead == "" }

// stepTypeTable is the table, in the order error messages list the types.
var stepTypeTable = []StepTypeSpec{
	{Type: StepTypeNoOp},
	{Type: StepTypeSleep, Config: map[string]ConfigCheck{"sleep_seconds": checkDurationConfig}},
	{Type: StepTypeTitus, Instead: "run the container with an EcsTask step"},
	// Notebook runs papermill in the engine's carrier (a Batch job or an
	// ECS task), [aws-steps] part B.
	{Type: StepTypeNotebook, JobParam: "notebook", JobFields: []string{"input_path"}, JobParamStringMap: true},
	{Type: StepTypeKubernetes, Instead: "run the container with an EcsTask step (ECS, Fargate) or a Batch step (AWS Batch)"},
	{Type: StepTypeHTTP, JobParam: "http", JobFields: []string{"url"}},
	{Type: StepTypeLambda, JobParam: "lambda", JobFields: []string{"function_name"}},
	{Type: StepTypeEcsTask, JobParam: "ecs_task", JobFields: []string{"task_definition"}},
	// AWS job steps (engine/stepruntime/awsjob).
	{Type: StepTypeAthena, JobParam: "athena", JobFields: []string{"query"}},
	{Type: StepTypeGlue, JobParam: "glue", JobFields: []string{"job_name"}},
	{Type: StepTypeStepFunctions, JobParam: "step_functions", JobFields: []string{"state_machine_arn"}},
	// [aws-steps] part B: AWS Batch and EMR.
	{Type: StepTypeBatch, JobParam: "batch", JobFields: []string{"job_definition"}},
	{Type: StepTypeEmr, JobParam: "emr", JobFields: []string{"step"}},
}

// StepTypes returns the step-type table: the types this deployment runs
// and Maestro's types it refuses, each with what validation needs of it.
func StepTypes() []StepTypeSpec {
	out := make([]StepTypeSpec, len(stepTypeTable))
	copy(out, stepTypeTable)
	return out
}

// StepTypeNames returns the names of every type in the table, those this
// deployment refuses included (a job template may be for any of them).
func StepTypeNames() []string {
	out := make([]string, len(stepTypeTable))
	for i, s := range stepTypeTable {
		out[i] = string(s.Type)
	}
	return out
}

// stepTypeSpec returns the table's row for t (canonical spelling).
func stepTypeSpec(t StepType) (StepTypeSpec, bool) {
	for _, s := range stepTypeTable {
		if s.Type == t {
			return s, true
		}
	}
	return StepTypeSpec{}, false
}
