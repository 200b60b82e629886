package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// ServeHTTP answers /v1/chat/completions, /v1/responses, /v1/messages,
// /v1/messages/count_tokens and /v1/models. A model call goes three steps:
// its route and token say whose call it is (here), readRequest reads and
// rewrites its body, and dispatch decides what becomes of it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	api, countTokens, ok := g.routeOf(w, r)
	if !ok {
		return
	}
	st := g.grant(r)
	if st == nil {
		writeError(w, api, http.StatusUnauthorized, "authentication_error", unknownToken)
		return
	}
	c := newCall(st, api, r, g.Now())
	c.countTokens = countTokens
	if !st.trial.enter(c) {
		c.release()
		writeError(w, api, http.StatusUnauthorized, "authentication_error", unknownToken)
		return
	}
	// Deferred calls run last first: the record is written while the call's
	// context still says why it ended, then the call is let go.
	defer st.trial.leave(c)
	defer c.release()
	defer g.finish(c) // every call the gateway answers has its record
	stop := context.AfterFunc(r.Context(), func() { c.end(errAgentGone, g.DrainGrace) })
	defer stop()
	body, ok := g.readRequest(w, r, c)
	if !ok {
		return
	}
	g.dispatch(w, r, c, body)
}

// routeOf names the API a request's route speaks, and whether it is
// Anthropic's count_tokens; false when it has answered the request itself
// (the models list, an unknown route).
func (g *Gateway) routeOf(w http.ResponseWriter, r *http.Request) (api modelcall.API, countTokens, ok bool) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		return modelcall.OpenAI, false, true
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		return modelcall.OpenAIResponses, false, true
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		return modelcall.Anthropic, false, true
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		return modelcall.Anthropic, true, true
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		g.serveModels(w, r)
	default:
		writeError(w, modelcall.OpenAI, http.StatusNotFound, "not_found", "troupe's gateway serves POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models")
	}
	return "", false, false
}

// refuse answers a call the gateway cannot take as it came: a bad request.
func (c *call) refuse(w http.ResponseWriter, status int, msg string) {
	c.status, c.errClass, c.errMsg = status, modelcall.ClassBadRequest, msg
	writeError(w, c.api, status, "invalid_request_error", msg)
}

// readRequest reads a call's body, within MaxRequestBytes and BodyTimeout,
// and rewrites it for the call's endpoint (rewriteBody). It returns false
// when it has refused the call, or the agent hung up before its request
// arrived.
func (g *Gateway) readRequest(w http.ResponseWriter, r *http.Request, c *call) ([]byte, bool) {
	st, api := c.st, c.api
	ep := st.endpoint
	if !speaks(ep.API, api) {
		path := map[modelcall.API]string{modelcall.OpenAI: "/v1/chat/completions", modelcall.Anthropic: "/v1/messages"}[ep.API]
		msg := fmt.Sprintf("endpoint %s speaks the %s API; call %s", ep.Name, ep.API, path)
		if api == modelcall.OpenAIResponses {
			msg = fmt.Sprintf("endpoint %s does not speak OpenAI's Responses API (/v1/responses): it speaks the %s API; call %s", ep.Name, ep.API, path)
		}
		c.refuse(w, http.StatusBadRequest, msg)
		return nil, false
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(g.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.MaxRequestBytes))
	switch _, tooLarge := errors.AsType[*http.MaxBytesError](err); {
	case tooLarge:
		c.refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", g.MaxRequestBytes))
		return nil, false
	case isTimeout(err):
		// The rest of the body is not waited for: the connection closes.
		w.Header().Set("Connection", "close")
		c.status, c.errClass, c.errMsg = http.StatusRequestTimeout, modelcall.ClassDisconnect, fmt.Sprintf("%sthe body did not arrive within %s", modelcall.RequestCut, g.BodyTimeout)
		writeError(w, api, http.StatusRequestTimeout, "invalid_request_error", c.errMsg)
		return nil, false
	case err != nil:
		c.errClass, c.errMsg = modelcall.ClassDisconnect, modelcall.RequestCut+err.Error()
		return nil, false
	}
	rc.SetReadDeadline(time.Time{}) // the answer may take longer; a hang-up still ends it
	body, c.stream, c.asked, err = rewriteBody(api, body, ep.Model)
	if st.spec.Conversation != nil && err == nil {
		c.request = body
	}
	if err != nil {
		c.refuse(w, http.StatusBadRequest, err.Error())
		return nil, false
	}
	return body, true
}

// dispatch decides what becomes of a call whose request arrived: refused
// after its trial's end or for a spent budget, answered from a replay's
// recording, disturbed by a fault, or forwarded.
func (g *Gateway) dispatch(w http.ResponseWriter, r *http.Request, c *call, body []byte) {
	st := c.st
	if st.ended() { // before a replay takes the call from its recording
		c.refuseEnded(w)
		return
	}
	if c.countTokens { // free: not counted against the budgets, not disturbed
		g.forward(w, r, c, body)
		return
	}
	if st.replay != nil && !g.replayCall(w, c, body) {
		return
	}
	refusal, frozen := st.admit()
	if frozen && refusal == nil {
		c.refuseEnded(w)
		return
	}
	c.admitted = refusal == nil
	if refusal != nil {
		c.status, c.errClass, c.errMsg = http.StatusTooManyRequests, modelcall.ClassBudgetExhausted, refusal.Error()
		// A spent budget stays spent: both official SDKs would otherwise
		// retry a 429, to be refused again.
		w.Header().Set("X-Should-Retry", "false")
		writeError(w, c.api, http.StatusTooManyRequests, modelcall.ClassBudgetExhausted, refusal.Error())
		return
	}
	if f := g.takeFault(st); f != nil && c.replayed == nil { // a replayed call had its faults
		c.fault = f.String()
		if !f.apply(w, c) {
			return
		}
	}
	g.forward(w, r, c, body)
}

// forward sends the rewritten body upstream (or to the mock) in the call's
// own context.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, c *call, body []byte) {
	out := r.Clone(c.ctx)
	c.body = body
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	g.proxy.ServeHTTP(w, out)
}

// speaks says whether an endpoint answers calls in a wire format: a mock
// answers every one, an openai upstream chat completions and the Responses
// API, an anthropic upstream messages.
func speaks(endpoint, call modelcall.API) bool {
	return endpoint == Mock || endpoint == call || (endpoint == modelcall.OpenAI && call == modelcall.OpenAIResponses)
}

const unknownToken = "unknown or revoked troupe gateway token; use the token troupe gave this agent"

// rewriteBody replaces the model with the endpoint's, so an agent cannot
// choose another, and asks OpenAI streams to report usage. (A Responses
// stream always reports it, and would refuse stream_options.include_usage.)
func rewriteBody(api modelcall.API, body []byte, model string) ([]byte, bool, *modelcall.Asked, error) {
	r, err := modelcall.ParseRequest(api, body)
	if err != nil {
		return nil, false, nil, fmt.Errorf("request body is not a JSON object: %v", err)
	}
	if api == modelcall.OpenAIResponses && r.Background() {
		// Not meterable: a background response answers at once and bills
		// later, out of the gateway's sight.
		return nil, false, nil, errors.New("background responses are not served: troupe's gateway meters a call by its answer, and a background response answers later; leave background unset")
	}
	asked := r.Asked()
	req := r.Fields
	req["model"], _ = json.Marshal(model)
	stream := r.Stream()
	if stream && api == modelcall.OpenAI {
		var opts map[string]json.RawMessage
		if raw, ok := req["stream_options"]; !ok || json.Unmarshal(raw, &opts) != nil || opts == nil {
			opts = map[string]json.RawMessage{} // absent, null or not an object
		}
		opts["include_usage"] = json.RawMessage("true")
		req["stream_options"], _ = json.Marshal(opts)
	}
	out, err := json.Marshal(req)
	return out, stream, asked, err
}

// grant finds the agent a request's token belongs to. The OpenAI SDK sends
// "Authorization: Bearer"; the Anthropic SDK sends "x-api-key".
func (g *Gateway) grant(r *http.Request) *agentState {
	token := r.Header.Get("x-api-key")
	if auth := r.Header.Get("Authorization"); token == "" && strings.HasPrefix(auth, "Bearer ") {
		token = strings.TrimPrefix(auth, "Bearer ")
	}
	if token == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grants[token]
}

// serveModels lists the one model the agent may use, in the shape of the
// API its client speaks.
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	api := modelcall.OpenAI
	if r.Header.Get("anthropic-version") != "" {
		api = modelcall.Anthropic
	}
	st := g.grant(r)
	if st == nil {
		writeError(w, api, http.StatusUnauthorized, "authentication_error", "unknown or revoked troupe gateway token")
		return
	}
	name := st.spec.Endpoint
	var body any = map[string]any{"object": "list", "data": []any{map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "troupe"}}}
	if api == modelcall.Anthropic {
		body = map[string]any{"data": []any{map[string]any{"type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}}, "has_more": false, "first_id": name, "last_id": name}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}
