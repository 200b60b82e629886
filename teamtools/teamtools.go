// Package teamtools is the team's channel as MCP tools (send_message,
// read_channel, list_team) for an agent troupe hosts: the ACP bridge's
// child (troupe acp) and a one-shot agent's every run (troupe cli). The
// tools act through the host's own relay connection, so the server lives
// in the host; the agent reaches it with `troupe mcp --socket PATH` (Pipe),
// a stdio MCP server every MCP client can start, which connects to a Unix
// socket in a private folder (mode 0700) of the agent's HOME. The socket
// serves the host's uid alone (SO_PEERCRED): teammates, who run as other
// uids in the same container, cannot reach another member's tools, and no
// secret is needed, which an HTTP server on the shared loopback would need.
// It also says how a hosted agent is shown the channel (Line, Unseen), the
// same in read_channel and in both bridges' prompts.
package teamtools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/member"
	"golang.org/x/sys/unix"
)

// ServerName is the name the team tools' MCP server has in the agent's
// session.
const ServerName = "troupe-team"

// RecentShown is how many of the newest channel messages read_channel
// returns by default, and a host shows its agent as context: as many as
// the reference agent shows.
const RecentShown = 40

// Channel is what the team tools need of the host's member.
type Channel interface {
	Send(ctx context.Context, content string, mentions []string, extra ...nostr.Tag) (*nostr.Event, error)
	History() []*nostr.Event
	Team() *member.Team
	Self() member.Participant
}

var _ Channel = (*member.Member)(nil)

// sendArgs are send_message's arguments.
type sendArgs struct {
	Content  string   `json:"content" jsonschema:"the message"`
	Mentions []string `json:"mentions" jsonschema:"who is woken: teammate ids, roles, or user"`
}

// readArgs are read_channel's arguments.
type readArgs struct {
	Limit int `json:"limit,omitempty" jsonschema:"how many of the newest messages (default 40, at most 200)"`
}

// newTeamTools is the MCP server of the team tools; onSent is told of
// every message sent through it. stranger, when set, says of a session
// whether a process other than the host's own agent (or its children)
// holds it: what it sends is marked so in the transcript. ready says
// whether the channel may be used yet: the host's member has joined it
// and knows the team.
func newTeamTools(ch Channel, version string, onSent func(*nostr.Event), stranger func(*mcp.ServerSession) string, ready func() error, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "send_message", Description: "Send a message to the team channel. Only mentioned teammates are woken: give their ids or roles (or \"user\"). The orchestrator ends the trial with a message whose content starts with DONE:."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sendArgs) (*mcp.CallToolResult, any, error) {
			if err := ready(); err != nil {
				return nil, nil, err
			}
			var extra []nostr.Tag
			who := ""
			if stranger != nil && req != nil {
				who = stranger(req.Session)
			}
			if who != "" {
				extra = append(extra, nostr.Tag{member.TagForeignSender, who})
			}
			ev, err := ch.Send(ctx, in.Content, in.Mentions, extra...)
			log.Info("mcp tool call", "tool", "send_message", "mentions", strings.Join(in.Mentions, ","), "content", clip.Head(in.Content, 300), "failed", err != nil, "foreign_sender", who)
			if err != nil {
				return nil, nil, err
			}
			onSent(ev)
			return text("sent"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_channel", Description: "Read the channel's recent messages, oldest first."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in readArgs) (*mcp.CallToolResult, any, error) {
			if err := ready(); err != nil {
				return nil, nil, err
			}
			limit := in.Limit
			if limit <= 0 {
				limit = RecentShown
			}
			history := ch.History()
			history = history[max(0, len(history)-min(limit, member.HistoryKept)):]
			team := ch.Team()
			var lines []string
			for _, ev := range history {
				lines = append(lines, Line(ev, team.Name))
			}
			log.Info("mcp tool call", "tool", "read_channel", "messages", len(lines))
			if len(lines) == 0 {
				return text("(no messages yet)"), nil, nil
			}
			return text(strings.Join(lines, "\n")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_team", Description: "List the team: each member's id, role and kind (orchestrator, worker, or the user)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if err := ready(); err != nil {
				return nil, nil, err
			}
			self := ch.Self()
			var lines []string
			for _, p := range ch.Team().Members {
				line := fmt.Sprintf("%s: role %s, %s", p.ID, p.Role, p.Kind)
				if p.Pubkey == self.Pubkey {
					line += " (you)"
				}
				lines = append(lines, line)
			}
			log.Info("mcp tool call", "tool", "list_team")
			return text(strings.Join(lines, "\n")), nil, nil
		})
	return s
}

// Line is a channel message as a hosted agent is shown it, by read_channel
// and in a prompt: "id (role): text", the text's first 2000 characters.
func Line(ev *nostr.Event, name func(pk string) string) string {
	return fmt.Sprintf("%s: %s", name(ev.PubKey), clip.Head(ev.Content, 2000))
}

// Unseen returns the channel's messages an agent's session has not seen
// yet, as Lines, at most RecentShown of the newest, and marks every
// message of history seen. The trigger and the member's own messages are
// left out: the first comes last in the prompt, the session holds the
// second.
func Unseen(history []*nostr.Event, seen map[string]bool, trigger *nostr.Event, self string, name func(pk string) string) []string {
	var lines []string
	for _, ev := range history {
		if seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		if ev.ID == trigger.ID || ev.PubKey == self {
			continue
		}
		lines = append(lines, Line(ev, name))
	}
	seen[trigger.ID] = true
	return lines[max(0, len(lines)-RecentShown):]
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// Server serves the team tools on a Unix socket in a private folder, to
// connections of this process's uid only. New, Open, then Close.
type Server struct {
	srv      *mcp.Server
	joined   chan struct{}
	joinOnce sync.Once
	dir      string // where the private folder is made; empty: the system's temporary folder
	log      *slog.Logger

	path   string
	tmp    string // the folder made for the socket, removed by Close
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	open   map[*mcp.ServerSession]bool
	// strangers are the sessions held by a process that is not the
	// host's descendant (another agent, with agent_user root), by what
	// is known of it.
	strangers map[*mcp.ServerSession]string
}

// New prepares the team tools of ch, served in a private folder made in
// dir (the agent's HOME; empty: the system's temporary folder). onSent,
// when set, is told of every message the agent sends through them.
func New(ch Channel, dir, version string, onSent func(*nostr.Event), log *slog.Logger) *Server {
	if onSent == nil {
		onSent = func(*nostr.Event) {}
	}
	s := &Server{dir: dir, log: log, joined: make(chan struct{})}
	s.srv = newTeamTools(ch, version, onSent, s.stranger, s.ready, log)
	return s
}

// Joined says that the host's member has joined the channel: the tools
// serve calls from then on. The socket is served before (an ACP agent
// starts its MCP servers during its handshake, which comes first), and a
// tool called too early is an error for the agent, never a read of a
// team still being learnt.
func (s *Server) Joined() { s.joinOnce.Do(func() { close(s.joined) }) }

var errNotJoined = errors.New("the team channel is not joined yet: try again in a moment")

func (s *Server) ready() error {
	select {
	case <-s.joined:
		return nil
	default:
		return errNotJoined
	}
}

// stranger says who holds ss when it is not the host's own agent or a
// child of it; "" when it is.
func (s *Server) stranger(ss *mcp.ServerSession) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.strangers[ss]
}

// maxSocketPath: a Unix socket's path must fit sockaddr_un.
const maxSocketPath = 100

// Open makes the folder (mode 0700), listens, and serves until Close.
func (s *Server) Open(ctx context.Context) error {
	s.open, s.strangers = map[*mcp.ServerSession]bool{}, map[*mcp.ServerSession]string{}
	tmp, err := os.MkdirTemp(s.dir, ".troupe-team-")
	if err == nil && len(filepath.Join(tmp, "mcp.sock")) > maxSocketPath {
		os.Remove(tmp)
		tmp, err = os.MkdirTemp("", "troupe-team-")
	}
	if err != nil {
		return fmt.Errorf("make the MCP socket's folder: %w", err)
	}
	s.tmp = tmp // os.MkdirTemp makes it 0700
	s.path = filepath.Join(tmp, "mcp.sock")
	s.ln, err = net.Listen("unix", s.path)
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("listen for the team tools: %w", err)
	}
	s.wg.Go(func() { s.accept(ctx) })
	return nil
}

// Path is the socket's path, once Open returned.
func (s *Server) Path() string { return s.path }

func (s *Server) accept(ctx context.Context) {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		cred, err := peerCred(conn)
		if err != nil || int(cred.Uid) != os.Getuid() {
			uid := -1
			if cred != nil {
				uid = int(cred.Uid)
			}
			s.log.Warn("mcp connection refused: not this agent's uid", "uid", uid, "err", errString(err))
			conn.Close()
			continue
		}
		// Same uid (agents running as root share it): a process outside
		// the host's own tree is another agent's. It is served, and what
		// it sends is marked.
		who := ""
		if !descendant(int(cred.Pid), os.Getpid()) {
			who = fmt.Sprintf("pid %d (%s): not a process of this member's agent", cred.Pid, command(int(cred.Pid)))
			s.log.Warn("mcp connection from a process outside this member's agent", "pid", cred.Pid, "command", command(int(cred.Pid)))
		}
		// Held until the session is on record, so that no tool call of
		// it is served unmarked.
		s.mu.Lock()
		ss, err := s.srv.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
		if err != nil {
			s.mu.Unlock()
			s.log.Warn("mcp connection failed", "err", err.Error())
			conn.Close()
			continue
		}
		if who != "" {
			s.strangers[ss] = who
		}
		if s.closed {
			s.mu.Unlock()
			ss.Close()
			continue
		}
		s.open[ss] = true
		s.mu.Unlock()
		s.wg.Go(func() {
			ss.Wait()
			s.mu.Lock()
			delete(s.open, ss)
			delete(s.strangers, ss)
			s.mu.Unlock()
		})
	}
}

// Close stops listening, ends every session and removes the socket.
func (s *Server) Close() error {
	var errs []error
	if s.ln != nil {
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	s.closed = true
	open := slices.Collect(maps.Keys(s.open))
	s.mu.Unlock()
	for _, ss := range open {
		ss.Close()
	}
	s.wg.Wait()
	if s.tmp != "" {
		errs = append(errs, os.RemoveAll(s.tmp))
	}
	return errors.Join(errs...)
}

// peerCred is who is at the other end of a Unix socket: its uid and pid,
// as the kernel saw them at connect.
func peerCred(conn net.Conn) (*unix.Ucred, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a Unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) { cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, credErr
	}
	return cred, nil
}

// descendant says whether process pid is ancestor or one of its
// descendants, following parents through /proc.
func descendant(pid, ancestor int) bool {
	for range 128 {
		if pid == ancestor {
			return true
		}
		if pid <= 1 {
			return false
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			return false
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 {
			return false
		}
		if pid, err = strconv.Atoi(f[1]); err != nil {
			return false
		}
	}
	return false
}

// command is a process's name, for the record.
func command(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "unknown"
	}
	return clip.Head(strings.TrimSpace(string(data)), 64)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Pipe is `troupe mcp --socket PATH`: the stdio MCP server a host gives
// its agent, which connects its standard input and output to the host's
// socket. It returns when the host closes the connection or
// the child closes its end.
func Pipe(ctx context.Context, socket string, in io.Reader, out io.Writer) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("connect to the team tools of troupe acp or troupe cli: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	// The child's side ends with its stdin: the host then sees the end
	// of its requests. The copy may stay blocked in a read of stdin when
	// the host ends first; the process exits then anyway.
	go func() {
		io.Copy(conn, in)
		conn.(*net.UnixConn).CloseWrite()
	}()
	_, err = io.Copy(out, conn)
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
