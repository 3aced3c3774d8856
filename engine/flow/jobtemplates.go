package flow

import (
	"context"
	"errors"

	"github.com/maestro-aws/maestro/engine/jobtemplate"
	"github.com/maestro-aws/maestro/engine/params"
	"github.com/maestro-aws/maestro/engine/workflow"
)

// templateParams returns the params the attempt's step inherits from the
// job template its sub_type names, as Maestro's JobTemplateManager loads
// them: at the version the run's job_template_version param names, else
// "default"; nil for a step without a sub_type or whose job type has no
// template. A template for another step type, or one that inherits from
// itself, fails the step's params for good.
func (a *stepActor) templateParams(ctx context.Context) (workflow.Params, error) {
	st := a.node.Step
	if st == nil || st.SubType == "" {
		return nil, nil
	}
	version, _ := a.f.plain()[workflow.JobTemplateVersionParam].(string)
	if version == "" {
		version = jobtemplate.DefaultVersion
	}
	ps, err := jobtemplate.NewStore(a.f.eng.db).Params(ctx, string(st.Type), st.SubType, version)
	if errors.Is(err, jobtemplate.ErrInvalid) {
		return nil, &params.Error{Param: "sub_type " + st.SubType, Err: err}
	}
	return ps, err
}
