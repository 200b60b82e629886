// Command flooder plays an agent that tries to starve the other trials of
// its job: it holds as many connections as it can to the relay and the
// gateway through its trial's tunnel, and opens a new one whenever one is
// closed. The tests build it into a task's image and start it in a trial.
//
//	flooder RELAY_CONNS LLM_CONNS
//
// Nine in ten of the relay connections finish the websocket upgrade and
// then say nothing (never authenticating); the others send half a request
// and stall. Half of the gateway connections are idle; the other half send a
// request's headers and a tenth of its announced body, then stall. It runs
// until it is killed, printing how many connections it holds every second.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

var held, opened, refused atomic.Int64

var token string

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: flooder RELAY_CONNS LLM_CONNS")
		os.Exit(2)
	}
	relayN, _ := strconv.Atoi(os.Args[1])
	llmN, _ := strconv.Atoi(os.Args[2])
	if b, err := os.ReadFile(os.Getenv("TROUPE_LLM_TOKEN_FILE")); err == nil {
		token = strings.TrimSpace(string(b))
	}
	for i := range relayN {
		if i%10 != 9 {
			go hold("127.0.0.1:3600", upgrade)
		} else {
			go hold("127.0.0.1:3600", partial)
		}
	}
	for i := range llmN {
		if i%2 == 0 {
			go hold("127.0.0.1:3601", idle)
		} else {
			go hold("127.0.0.1:3601", slowBody)
		}
	}
	for {
		time.Sleep(time.Second)
		fmt.Printf("held %d opened %d refused %d\n", held.Load(), opened.Load(), refused.Load())
	}
}

// hold keeps one connection open, opening another when it ends.
func hold(addr string, start func(net.Conn) bool) {
	for {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			refused.Add(1)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		opened.Add(1)
		if start(c) {
			held.Add(1)
			// Hold it: read until the other side closes it.
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			held.Add(-1)
		} else {
			refused.Add(1)
		}
		c.Close()
		time.Sleep(200 * time.Millisecond)
	}
}

// upgrade completes a websocket upgrade.
func upgrade(c net.Conn) bool {
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1:3600\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	c.SetReadDeadline(time.Time{})
	return err == nil && len(line) > 12 && line[9:12] == "101"
}

// partial sends half of an upgrade request.
func partial(c net.Conn) bool {
	_, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1:3600\r\nUpgr")
	return err == nil
}

func idle(net.Conn) bool { return true }

// slowBody announces a body and sends a tenth of it, with the agent's own
// token, so that the gateway starts reading it.
func slowBody(c net.Conn) bool {
	_, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:3601\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":\"x\",", token)
	return err == nil
}
