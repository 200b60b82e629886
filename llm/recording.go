package llm

import "github.com/troupebench/troupe/modelcall"

// maxAnswerKept bounds the answer kept of one call.
const maxAnswerKept = 4 << 20

// recordConversation writes a finished call to the agent's conversation
// record (AgentSpec.Conversation), scrubbed of the trial's secrets by the
// record's writer before its digests are taken. The caller holds the
// trial's mutex.
func (st *agentState) recordConversation(c *call) {
	w := st.spec.Conversation
	if w == nil || c.request == nil {
		return
	}
	t := st.trial
	if st.conv == nil {
		st.conv = modelcall.NewRecordWriter(w, t.records.Scrub)
	}
	line := modelcall.Call{Time: c.start.UTC(), API: c.api, Status: c.status, Stream: c.stream, Request: c.request,
		AnswerOmitted: c.answerOmitted, Error: c.errMsg}
	if err := st.conv.Write(line, c.answer.Bytes()); err != nil {
		t.g.Logger.Error("cannot write the conversation record", "agent", st.spec.ID, "err", err)
	}
}

// keepAnswer adds what the agent received to the call's answer, within
// maxAnswerKept; the rest is counted. It is kept with no record too: the
// gateway reads from it whether the agent's turn goes on.
func (c *call) keepAnswer(data []byte) {
	room := maxAnswerKept - c.answer.Len()
	if room < len(data) {
		c.answerOmitted += len(data) - max(room, 0)
		data = data[:max(room, 0)]
	}
	c.answer.Write(data)
}
