// Package relay is troupe's embedded Nostr relay: the only way the agents of
// a trial talk to each other, and the orchestrator's eyes on them.
//
// A Relay serves NIP-01 over websockets with NIP-42 authentication required
// for everything, and NIP-11 over plain HTTP. It carries trial channels:
// OpenChannel registers a channel with exactly its members (the agents and
// the trial user); only an authenticated member reads or writes it, and only
// kind 9 messages with one "h" tag naming it (plus members' kind 0 profiles).
// Refusals are fail-closed and carry a machine prefix (auth-required:,
// restricted:, invalid:, rate-limited:) and a human reason; each is written
// to the audit log.
//
// The orchestrator uses a Channel in process, without a websocket: Post
// speaks as the trial user, Subscribe follows every accepted event,
// WaitReady waits (on events, never by polling) until every agent has
// authenticated and holds a live subscription to the channel, and Done
// delivers the orchestrator's first "DONE:" message. A "DONE:" from anyone
// else is counted and kept, and ends nothing. Every accepted event is
// appended to the channel's transcript in relay order.
//
// Each websocket connection has one reader goroutine, which handles the
// client's messages in order, and one writer goroutine, which drains a
// bounded queue; a client that falls that far behind is disconnected rather
// than allowed to stall the others. Close stops and waits for every
// goroutine the relay started.
//
// The relay is built on go-nostr's types (events, filters, envelopes, NIP-42
// validation) and coder/websocket rather than on khatru: khatru handles each
// message in an unowned goroutine, starts a goroutine per relay that never
// stops, has no hook to refuse an AUTH, and lets a REQ with limit 0 skip its
// filter checks; troupe needs the opposite of each.
package relay
