package llm

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/troupebench/troupe/modelcall"
)

// writeError answers in the error shape of the API that was called, so an
// SDK raises its usual typed error.
func writeError(w http.ResponseWriter, api modelcall.API, status int, errType, message string) {
	b := errorBody(api, errType, message)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// errorBody is an error in the shape the API's SDKs parse.
func errorBody(api modelcall.API, errType, message string) []byte {
	var body any
	if api == modelcall.Anthropic {
		body = map[string]any{"type": "error", "error": map[string]any{"type": errType, "message": message}}
	} else {
		body = map[string]any{"error": map[string]any{"message": message, "type": errType, "code": errType, "param": nil}}
	}
	b, _ := json.Marshal(body)
	return b
}
