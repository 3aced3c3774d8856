package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"go.yaml.in/yaml/v3"

	"github.com/maestro-aws/maestro/engine/jobtemplate"
)

// jobTemplateRoutes registers Maestro's job template endpoints.
func (s *Server) jobTemplateRoutes() {
	s.handle("POST /api/v3/job-templates", s.upsertJobTemplate(decodeJobTemplateJSON))
	s.handle("POST /api/v3/job-templates/yaml", s.upsertJobTemplate(decodeJobTemplateYAML))
	s.handle("GET /api/v3/job-templates", s.listJobTemplates)
	s.handle("GET /api/v3/job-templates/{type}", s.getJobTemplate)
	s.handle("DELETE /api/v3/job-templates/{type}", s.deleteJobTemplate)
}

// jobTemplateRequestFields are Maestro's JobTemplateCreateRequest fields;
// others are kept as the template's metadata extra info.
var jobTemplateRequestFields = map[string]bool{"owner": true, "status": true, "support": true, "test_workflows": true,
	"git_info": true, "definition": true}

// decodeJobTemplateJSON reads Maestro's JobTemplateCreateRequest.
func decodeJobTemplateJSON(data []byte) (*jobtemplate.Template, error) {
	var fields map[string]json.RawMessage
	if err := decodeJSON(data, &fields, false); err != nil {
		return nil, badRequest("malformed request body", err.Error())
	}
	t := &jobtemplate.Template{}
	var problems []string
	field := func(name string, v any) {
		if raw, ok := fields[name]; ok && string(raw) != "null" {
			if err := decodeJSON(raw, v, true); err != nil {
				problems = append(problems, name+": "+err.Error())
			}
		}
	}
	t.Metadata.Owner = fields["owner"]
	field("status", &t.Metadata.Status)
	field("support", &t.Metadata.Support)
	field("test_workflows", &t.Metadata.TestWorkflows)
	field("git_info", &t.Metadata.GitInfo)
	field("definition", &t.Definition)
	if _, ok := fields["definition"]; !ok {
		problems = append(problems, "definition: required")
	}
	for k, v := range fields {
		if !jobTemplateRequestFields[k] {
			if t.Metadata.Extra == nil {
				t.Metadata.Extra = map[string]json.RawMessage{}
			}
			t.Metadata.Extra[k] = v
		}
	}
	if len(problems) > 0 {
		return nil, badRequest("invalid job template", problems...)
	}
	return t, nil
}

// decodeJobTemplateYAML reads the same request written in YAML.
func decodeJobTemplateYAML(data []byte) (*jobtemplate.Template, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, badRequest("malformed YAML", err.Error())
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, badRequest("the YAML document is not a JSON object: " + err.Error())
	}
	return decodeJobTemplateJSON(raw)
}

// upsertJobTemplate creates or replaces a job template version and answers
// it, as Maestro's JobTemplate.
func (s *Server) upsertJobTemplate(decode func([]byte) (*jobtemplate.Template, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		data, err := readBody(r)
		if err != nil {
			return err
		}
		t, err := decode(data)
		if err != nil {
			return err
		}
		out, err := jobtemplate.NewStore(s.cfg.DB).Upsert(r.Context(), t, s.actor(r).Who())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// versionQuery is the version query parameter, def when absent.
func versionQuery(r *http.Request, def string) string {
	if v := r.URL.Query().Get("version"); v != "" {
		return v
	}
	return def
}

func (s *Server) getJobTemplate(w http.ResponseWriter, r *http.Request) error {
	t, err := jobtemplate.NewStore(s.cfg.DB).Get(r.Context(), r.PathValue("type"), versionQuery(r, jobtemplate.DefaultVersion))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// listJobTemplates answers the templates at a version (default "default"),
// a JSON array.
func (s *Server) listJobTemplates(w http.ResponseWriter, r *http.Request) error {
	ts, err := jobtemplate.NewStore(s.cfg.DB).List(r.Context(), versionQuery(r, jobtemplate.DefaultVersion))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ts)
	return nil
}

// deleteJobTemplate removes a job type's template at a version, or every
// version when none is named, and answers Maestro's message (a JSON
// string).
func (s *Server) deleteJobTemplate(w http.ResponseWriter, r *http.Request) error {
	version := versionQuery(r, "")
	n, err := jobtemplate.NewStore(s.cfg.DB).Delete(r.Context(), r.PathValue("type"), version)
	if err != nil {
		return err
	}
	shown := version
	if shown == "" {
		shown = "null"
	}
	writeJSON(w, http.StatusOK, fmt.Sprintf("Removed [%d] job template versions for job type: [%s][%s]", n, r.PathValue("type"), shown))
	return nil
}
