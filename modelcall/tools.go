package modelcall

import "encoding/json"

// Tool is a tool a request offers: as sent, decoded (Decoded), and read
// as a function where it is one. Chat completions wrap a function in
// {type: function, function: {name, description, parameters}};
// Anthropic's tool is {name, description, input_schema} and the Responses
// API's {type: function, name, description, parameters}. A tool named only
// by its type (the Responses API's web_search) has no Function; one with a
// name but no schema (Anthropic's built-in tools) reads as a function
// without parameters.
type Tool struct {
	Decoded  map[string]any
	Function *FunctionTool
}

// FunctionTool is a function tool's name, description and parameters (a
// JSON schema), as sent; each nil when the tool gives none.
type FunctionTool struct {
	Name, Description, Parameters any
	// Wrapped: chat completions' shape, the function inside the tool.
	Wrapped bool
}

// ParseTools reads a request's tools (Request.Tools); false when they are
// not a list of objects.
func ParseTools(raw json.RawMessage) ([]Tool, bool) {
	var list []map[string]any
	if json.Unmarshal(raw, &list) != nil {
		return nil, false
	}
	tools := make([]Tool, len(list))
	for i, t := range list {
		tools[i] = Tool{Decoded: t}
		switch {
		case t["function"] != nil:
			f, _ := t["function"].(map[string]any)
			tools[i].Function = &FunctionTool{Name: f["name"], Description: f["description"], Parameters: f["parameters"], Wrapped: true}
		case t["input_schema"] != nil:
			tools[i].Function = &FunctionTool{Name: t["name"], Description: t["description"], Parameters: t["input_schema"]}
		case t["name"] != nil:
			tools[i].Function = &FunctionTool{Name: t["name"], Description: t["description"], Parameters: t["parameters"]}
		}
	}
	return tools, true
}
