// Package modelcall is the model call as data: what troupe keeps of each
// call an agent makes, and the three wire formats it reads the calls in.
// It sits at the bottom of the import graph (the standard library and
// nothing of troupe's), so that whatever reads a trial's calls (the
// viewer, the ATIF export, a replay, a scenario made from a trial) needs
// none of the gateway that made them.
//
// It owns two formats of a trial folder, each with its one writer and
// its one reader:
//   - the metering line (agents/<id>/llm-calls.jsonl): a Record per call,
//     written with Record.Line and read with ParseRecord or ReadRecords;
//     Totals add them up, their cost a USD: an amount that sums whole and
//     is written (in every file and report that declares one) to the
//     micro-dollar;
//   - the conversation record (agents/<id>/llm-conversation.jsonl.gz):
//     every call whole, request and answer, its large parts stored once as
//     blocks named by their digest, tamper-evident; written a call at a
//     time by a RecordWriter, read a call at a time by a RecordReader,
//     within RecordLimits.
//
// It reads the three wire formats (OpenAI's chat completions and Responses
// API, Anthropic's messages) into one view: a request body is a Request
// whose history is Messages of Content and Parts (text, tool calls, tool
// results), beside its system prompt and its Tools; an answer, a JSON body
// or a stream's events, is an Answer (its text, its tool calls, its
// Usage). InspectEvent and ResponseUsage read usage as the gateway meters
// it, Request.Asked what a call asked beside its messages, ReadPrompt what
// a scripted model reads of a request. The view keeps what it could not
// read as the formats define (a part or an item of the wrong shape is
// Malformed, and read as far as it goes), so that each reader decides how
// to show it. Package llm keeps what the gateway does with the calls:
// forwarding, pricing, budgets, faults, mock models and replays (whose
// report, ReplayReport, is data here too).
package modelcall
