package acpbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/troupebench/troupe/contract"
	"github.com/troupebench/troupe/internal/childlog"
	"github.com/troupebench/troupe/teamtools"
)

// Timing of the child's life.
const (
	// initTimeout bounds initialize and session/new together: an agent
	// that starts a runtime (node, python) may take a while.
	initTimeout = 2 * time.Minute
	// cancelGrace is how long a cancelled prompt may take to answer.
	cancelGrace = time.Second
	// stopGrace is how long the child gets after its stdin closes, and
	// again after TERM, before KILL.
	stopGrace = 500 * time.Millisecond
)

// child is the ACP agent the bridge hosts: its process, in a process
// group of its own, and the client side of its connection over stdio.
type child struct {
	argv []string
	env  []string
	dir  string
	log  *slog.Logger

	cmd    *exec.Cmd
	stdin  *os.File // the write end of the child's stdin
	stdout *os.File // the read end of its stdout
	conn   *acp.ClientSideConnection
	stderr *childlog.Lines
	exited chan struct{} // closed once Wait returned
	wg     sync.WaitGroup

	goneOnce sync.Once
	gone     chan struct{} // closed when the child is gone: exited, its output closed, or it broke the protocol
	why      error
	stopping chan struct{}
}

func newChild(argv, env []string, dir string, log *slog.Logger) *child {
	return &child{argv: argv, env: env, dir: dir, log: log, stderr: childlog.New(log),
		exited: make(chan struct{}), gone: make(chan struct{}), stopping: make(chan struct{})}
}

// start runs the child and connects client to it; stop ends it.
func (c *child) start(client acp.Client) error {
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	// The connection is made before the child starts, and reads nothing
	// until it is configured and the child's process is known: what the
	// reader does (a protocol break kills the child) happens after.
	gate := make(chan struct{})
	defer close(gate)
	frames := &frameReader{r: outR, gate: gate, onBreak: func(err *ProtocolError) {
		c.log.Error("protocol broken", "err", err.Error())
		c.fail(err)
		c.kill()
	}}
	c.conn = acp.NewClientSideConnection(client, inW, frames)
	c.conn.SetLogger(c.log.With("component", "acp"))
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Something the child started may hold its stderr open after it
	// exited: its end is known at once anyway.
	cmd.WaitDelay = stopGrace
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close() // the connection ends with its pipes
		outR.Close()
		c.fail(err)
		close(c.exited)
		return fmt.Errorf("start the ACP agent %s: %w", c.argv[0], err)
	}
	c.cmd, c.stdin, c.stdout = cmd, inW, outR
	c.wg.Go(func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		c.fail(fmt.Errorf("the ACP agent exited (%w)", err))
		close(c.exited)
	})
	c.wg.Go(func() {
		select {
		case <-c.conn.Done():
		case <-c.exited:
			return
		}
		// Its output closes as it exits: the exit says more.
		select {
		case <-c.exited:
		case <-time.After(time.Second):
			c.fail(errors.New("the ACP agent closed its standard output"))
		case <-c.stopping:
		}
	})
	return nil
}

// fail records why the child is gone, once.
func (c *child) fail(err error) {
	c.goneOnce.Do(func() {
		c.why = err
		close(c.gone)
	})
}

// Gone is closed when the child is gone; Why says how.
func (c *child) Gone() <-chan struct{} { return c.gone }

// Why says how the child went, once Gone is closed.
func (c *child) Why() error {
	<-c.gone
	return c.why
}

func (c *child) isGone() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

// open initializes the connection and makes the session: cwd is the
// working folder, and its MCP servers are the team tools and the task's
// (those whose transport the agent supports).
func (c *child) open(ctx context.Context, version string, cwd string, tools acp.McpServer, task []contract.MCPServer) (acp.SessionId, error) {
	ctx, cancel := context.WithTimeout(ctx, initTimeout)
	defer cancel()
	ctx, stop := c.whileAlive(ctx)
	defer stop()
	init, err := c.conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientInfo:      &acp.Implementation{Name: "troupe", Version: version},
		ClientCapabilities: acp.ClientCapabilities{
			Fs:       acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: true,
		},
	})
	if err != nil {
		return "", c.explain("initialize", err)
	}
	agent := ""
	if init.AgentInfo != nil {
		agent = init.AgentInfo.Name + " " + init.AgentInfo.Version
	}
	c.log.Info("initialize", "acp_agent", strings.TrimSpace(agent), "protocol_version", int(init.ProtocolVersion),
		"load_session", init.AgentCapabilities.LoadSession, "mcp_http", init.AgentCapabilities.McpCapabilities.Http)
	servers := append([]acp.McpServer{tools}, c.taskServers(task, init.AgentCapabilities.McpCapabilities)...)
	sess, err := c.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: servers})
	if err != nil {
		return "", c.explain("session/new", err)
	}
	c.log.Info("session/new", "session", string(sess.SessionId), "cwd", cwd)
	return sess.SessionId, nil
}

// taskServers are the task's MCP servers in ACP's form: a stdio server
// for every agent, an sse or http one for an agent that says it takes
// them; one it does not take is left out, and the log says so.
func (c *child) taskServers(task []contract.MCPServer, can acp.McpCapabilities) []acp.McpServer {
	var out []acp.McpServer
	for _, s := range task {
		switch {
		case s.Name == teamtools.ServerName:
			c.log.Warn("task MCP server left out: its name is the team tools'", "mcp_server", s.Name)
		case s.Transport == contract.TransportStdio:
			out = append(out, acp.McpServer{Stdio: &acp.McpServerStdio{Name: s.Name, Command: s.Command, Args: append([]string{}, s.Args...), Env: []acp.EnvVariable{}}})
		case s.Transport == contract.TransportStreamableHTTP && can.Http:
			out = append(out, acp.McpServer{Http: &acp.McpServerHttpInline{Name: s.Name, Type: "http", Url: s.URL, Headers: []acp.HttpHeader{}}})
		case s.Transport == contract.TransportSSE && can.Sse:
			out = append(out, acp.McpServer{Sse: &acp.McpServerSseInline{Name: s.Name, Type: "sse", Url: s.URL, Headers: []acp.HttpHeader{}}})
		default:
			c.log.Warn("task MCP server left out: the ACP agent does not take its transport (initialize's mcpCapabilities)", "mcp_server", s.Name, "transport", s.Transport)
		}
	}
	return out
}

// prompt sends a turn and waits for its end. When ctx ends first (the
// deadline, SIGTERM), it sends session/cancel and gives the agent
// cancelGrace to answer.
func (c *child) prompt(ctx context.Context, sid acp.SessionId, blocks []acp.ContentBlock) (acp.PromptResponse, error) {
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var resp acp.PromptResponse
	var err error
	done := make(chan struct{})
	c.wg.Go(func() {
		resp, err = c.conn.Prompt(pctx, acp.PromptRequest{SessionId: sid, Prompt: blocks})
		close(done)
	})
	select {
	case <-done:
	case <-c.gone:
		cancel()
	case <-ctx.Done():
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
		cerr := c.conn.Cancel(cctx, acp.CancelNotification{SessionId: sid})
		c.log.Info("session/cancel", "session", string(sid), "reason", context.Cause(ctx).Error(), "failed", cerr != nil)
		select {
		case <-done:
		case <-cctx.Done():
		case <-c.gone:
		}
		ccancel()
		cancel()
	}
	<-done
	if err != nil {
		return resp, c.explain("session/prompt", err)
	}
	return resp, nil
}

// whileAlive is ctx, ended also when the child goes.
func (c *child) whileAlive(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	c.wg.Go(func() {
		select {
		case <-c.gone:
			cancel()
		case <-ctx.Done():
		}
	})
	return ctx, cancel
}

// explain names a failed request, and why the child went if it did: a
// request fails as the connection closes, a moment before the exit is
// known.
func (c *child) explain(what string, err error) error {
	select {
	case <-c.conn.Done():
		<-c.gone // at most a second: see start
	default:
	}
	if c.isGone() {
		return fmt.Errorf("%s: %w", what, c.why)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// stop ends the child: its stdin closes (an ACP agent's cue to exit), then
// TERM, then KILL, each to its process group after stopGrace; whatever
// the group left goes too. It waits for every goroutine of the child.
func (c *child) stop() {
	if c.cmd == nil {
		return
	}
	close(c.stopping)
	c.stdin.Close()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			syscall.Kill(-c.cmd.Process.Pid, sig)
		}
		select {
		case <-c.exited:
		case <-time.After(stopGrace):
			continue
		}
		break
	}
	<-c.exited
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) // what the group left behind
	// Something outside the group may still hold the child's stdout: the
	// connection ends here anyway.
	c.stdout.Close()
	c.wg.Wait()
}

// kill ends the child's group at once: it broke the protocol.
func (c *child) kill() {
	if c.cmd != nil && c.cmd.Process != nil {
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// LastWords is the child's last stderr lines.
func (c *child) LastWords() string { return c.stderr.Last() }
