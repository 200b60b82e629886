// Package atiftest checks documents against Harbor's ATIF schema, written
// down here from Harbor's pydantic models (harbor-framework/harbor,
// src/harbor/models/trajectories/*.py at commit 2922220bf78b, schema
// ATIF-v1.7): the required fields, the JSON type of every field, the
// fields each model forbids (extra="forbid"), and the model validators
// (step ids sequential from 1, agent-only fields, observation results
// naming a tool call of their step, llm_call_count 0 without metrics).
package atiftest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Versions are the schema versions Harbor's Trajectory model accepts.
var Versions = []string{"ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4", "ATIF-v1.5", "ATIF-v1.6", "ATIF-v1.7"}

// kind is a JSON type, with null allowed or not.
type kind int

const (
	str kind = iota
	integer
	number
	object
	array
	strOrParts // str | list[ContentPart]
	boolean
)

// field is one field of a model: its type and whether it is required.
type field struct {
	kind     kind
	required bool
	// check, if set, checks the value further (a nested model).
	check func(path string, v any) []error
}

// model is a model's fields; any other field is refused.
type model map[string]field

// The models, from Harbor's.
var (
	trajectoryModel = model{
		"schema_version":           {kind: str},
		"session_id":               {kind: str},
		"trajectory_id":            {kind: str},
		"agent":                    {kind: object, required: true, check: sub(agentModel)},
		"steps":                    {kind: array, required: true},
		"notes":                    {kind: str},
		"final_metrics":            {kind: object, check: sub(finalMetricsModel)},
		"continued_trajectory_ref": {kind: str},
		"extra":                    {kind: object},
		"subagent_trajectories":    {kind: array},
	}
	agentModel = model{
		"name":             {kind: str, required: true},
		"version":          {kind: str, required: true},
		"model_name":       {kind: str},
		"tool_definitions": {kind: array, check: each(object)},
		"extra":            {kind: object},
	}
	stepModel = model{
		"step_id":           {kind: integer, required: true},
		"timestamp":         {kind: str, check: isoTime},
		"source":            {kind: str, required: true, check: oneOf("system", "user", "agent")},
		"model_name":        {kind: str},
		"reasoning_effort":  {kind: str}, // or a number: see checkValue
		"message":           {kind: strOrParts, required: true},
		"reasoning_content": {kind: str},
		"tool_calls":        {kind: array, check: eachModel(toolCallModel)},
		"observation":       {kind: object, check: sub(observationModel)},
		"metrics":           {kind: object, check: sub(metricsModel)},
		"is_copied_context": {kind: boolean},
		"llm_call_count":    {kind: integer},
		"extra":             {kind: object},
	}
	toolCallModel = model{
		"tool_call_id":  {kind: str, required: true},
		"function_name": {kind: str, required: true},
		"arguments":     {kind: object, required: true},
		"extra":         {kind: object},
	}
	observationModel = model{
		"results": {kind: array, required: true, check: eachModel(observationResultModel)},
	}
	observationResultModel = model{
		"source_call_id":          {kind: str},
		"content":                 {kind: strOrParts},
		"subagent_trajectory_ref": {kind: array},
		"extra":                   {kind: object},
	}
	metricsModel = model{
		"prompt_tokens":        {kind: integer},
		"completion_tokens":    {kind: integer},
		"cached_tokens":        {kind: integer},
		"cost_usd":             {kind: number},
		"prompt_token_ids":     {kind: array, check: each(integer)},
		"completion_token_ids": {kind: array, check: each(integer)},
		"logprobs":             {kind: array, check: each(number)},
		"extra":                {kind: object},
	}
	finalMetricsModel = model{
		"total_prompt_tokens":     {kind: integer},
		"total_completion_tokens": {kind: integer},
		"total_cached_tokens":     {kind: integer},
		"total_cost_usd":          {kind: number},
		"total_steps":             {kind: integer},
		"extra":                   {kind: object},
	}
)

// Check validates one trajectory document, returning every problem found.
func Check(data []byte) error {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return errors.New("the document is not an object")
	}
	errs := checkModel("", root, trajectoryModel)
	if v, ok := root["schema_version"].(string); ok && !slices.Contains(Versions, v) {
		errs = append(errs, fmt.Errorf("schema_version: %q is not one of %v", v, Versions))
	}
	steps, _ := root["steps"].([]any)
	if _, ok := root["steps"]; ok && len(steps) == 0 {
		errs = append(errs, errors.New("steps: at least one step is required"))
	}
	for i, s := range steps {
		p := fmt.Sprintf("steps[%d]", i)
		step, ok := s.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: not an object", p))
			continue
		}
		errs = append(errs, checkModel(p, step, stepModel)...)
		errs = append(errs, checkStep(p, i, step)...)
	}
	return errors.Join(errs...)
}

// checkStep applies the Step and Trajectory model validators.
func checkStep(p string, i int, step map[string]any) []error {
	var errs []error
	if id, ok := step["step_id"].(float64); ok && int(id) != i+1 {
		errs = append(errs, fmt.Errorf("%s.step_id: expected %d (sequential from 1), got %v", p, i+1, id))
	}
	if step["source"] != "agent" {
		for _, f := range []string{"model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"} {
			if v, ok := step[f]; ok && v != nil {
				errs = append(errs, fmt.Errorf("%s.%s: only an agent step may have it (source %v)", p, f, step["source"]))
			}
		}
	}
	if n, ok := step["llm_call_count"].(float64); ok {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s.llm_call_count: below 0", p))
		}
		if n == 0 && step["source"] == "agent" {
			for _, f := range []string{"metrics", "reasoning_content"} {
				if v, ok := step[f]; ok && v != nil {
					errs = append(errs, fmt.Errorf("%s.%s: must be absent when llm_call_count is 0", p, f))
				}
			}
		}
	}
	ids := map[string]bool{}
	calls, _ := step["tool_calls"].([]any)
	for _, c := range calls {
		if c, ok := c.(map[string]any); ok {
			if id, ok := c["tool_call_id"].(string); ok {
				ids[id] = true
			}
		}
	}
	if obs, ok := step["observation"].(map[string]any); ok {
		results, _ := obs["results"].([]any)
		for j, r := range results {
			r, _ := r.(map[string]any)
			if id, ok := r["source_call_id"].(string); ok && !ids[id] {
				errs = append(errs, fmt.Errorf("%s.observation.results[%d].source_call_id: %q is not a tool call of the step", p, j, id))
			}
		}
	}
	return errs
}

func checkModel(path string, obj map[string]any, m model) []error {
	var errs []error
	for name, f := range m {
		v, ok := obj[name]
		if !ok || v == nil {
			if f.required {
				errs = append(errs, fmt.Errorf("%s: required field missing", join(path, name)))
			}
			continue
		}
		if err := checkValue(join(path, name), v, f.kind); err != nil {
			if !(name == "reasoning_effort" && isNumber(v)) {
				errs = append(errs, err)
				continue
			}
		}
		if f.check != nil {
			errs = append(errs, f.check(join(path, name), v)...)
		}
	}
	for name := range obj {
		if _, ok := m[name]; !ok {
			errs = append(errs, fmt.Errorf("%s: field not allowed", join(path, name)))
		}
	}
	return errs
}

func checkValue(p string, v any, k kind) error {
	ok := false
	switch k {
	case str:
		_, ok = v.(string)
	case integer:
		n, isNum := v.(float64)
		ok = isNum && n == float64(int64(n))
	case number:
		ok = isNumber(v)
	case object:
		_, ok = v.(map[string]any)
	case array:
		_, ok = v.([]any)
	case boolean:
		_, ok = v.(bool)
	case strOrParts:
		if _, isStr := v.(string); isStr {
			return nil
		}
		parts, isArr := v.([]any)
		if !isArr {
			break
		}
		for i, part := range parts {
			pm, _ := part.(map[string]any)
			switch pm["type"] {
			case "text":
				if _, ok := pm["text"].(string); !ok {
					return fmt.Errorf("%s[%d]: a text part needs text", p, i)
				}
			case "image":
				if _, ok := pm["source"].(map[string]any); !ok {
					return fmt.Errorf("%s[%d]: an image part needs a source", p, i)
				}
			default:
				return fmt.Errorf("%s[%d]: a content part of type %v", p, i, pm["type"])
			}
		}
		return nil
	}
	if !ok {
		return fmt.Errorf("%s: %s expected, got %T", p, [...]string{"a string", "an integer", "a number", "an object", "an array", "a string or content parts", "a boolean"}[k], v)
	}
	return nil
}

func isNumber(v any) bool { _, ok := v.(float64); return ok }

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func sub(m model) func(string, any) []error {
	return func(p string, v any) []error { return checkModel(p, v.(map[string]any), m) }
}

func eachModel(m model) func(string, any) []error {
	return func(p string, v any) []error {
		var errs []error
		for i, x := range v.([]any) {
			o, ok := x.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Errorf("%s[%d]: an object expected", p, i))
				continue
			}
			errs = append(errs, checkModel(fmt.Sprintf("%s[%d]", p, i), o, m)...)
		}
		return errs
	}
}

func each(k kind) func(string, any) []error {
	return func(p string, v any) []error {
		var errs []error
		for i, x := range v.([]any) {
			if err := checkValue(fmt.Sprintf("%s[%d]", p, i), x, k); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}
}

func oneOf(values ...string) func(string, any) []error {
	return func(p string, v any) []error {
		if !slices.Contains(values, v.(string)) {
			return []error{fmt.Errorf("%s: %q is not one of %s", p, v, strings.Join(values, ", "))}
		}
		return nil
	}
}

// isoTime: Python's datetime.fromisoformat, with Z for +00:00.
func isoTime(p string, v any) []error {
	s := v.(string)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if _, err := time.Parse(layout, s); err == nil {
			return nil
		}
	}
	return []error{fmt.Errorf("%s: %q is not an ISO 8601 time", p, s)}
}
