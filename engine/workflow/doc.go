// Package workflow is the workflow definition model: the Maestro-compatible JSON shape
// ({properties, workflow, is_active} with step wrappers), a YAML DSL that converts to the same
// model, strict decoding that reports every unknown field with its JSON path, the validator, and
// the DAG helpers the engine runs steps with.
//
// The usual flow is
//
//	def, err := workflow.DecodeJSON(body) // or DecodeYAML
//	if err == nil {
//		err = validator.Validate(def)
//	}
//
// where every error is a *ValidationError listing Problems with the path of the offending
// element (for example "workflow.steps[2].step.transition.successors.job9").
//
// SEL expressions are not parsed here: the Validator takes a CheckExpression hook so the caller
// can plug in the SEL compiler.
package workflow
