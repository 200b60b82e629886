//go:build linux

package inside

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// tcpTable is /proc/net/tcp as the kernel writes it: a listener on
// 127.0.0.1:8088, one on 0.0.0.0:22, and an established connection.
const tcpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F98 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4001 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4002 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F98 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 4003 1 0000000000000000 20 4 30 10 -1
`

// tcp6Table: a listener on [::]:8090, and one on [::1]:3600.
const tcp6Table = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F9A 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        0 5001 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0E10 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5002 1 0000000000000000 100 0 0 10 0
`

// udpTable: a socket bound to 0.0.0.0:53, and one connected (state 01).
const udpTable = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  100: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 6001 2 0000000000000000 0
  101: 0100007F:D431 0100007F:0035 01 00000000:00000000 00:00000000 00000000     0        0 6002 2 0000000000000000 0
`

func TestParseNetSockets(t *testing.T) {
	for _, c := range []struct {
		name, table, proto string
		want               map[uint64]string
	}{
		{"tcp", tcpTable, "tcp", map[uint64]string{4001: "tcp 127.0.0.1:8088", 4002: "tcp 0.0.0.0:22"}},
		{"tcp6", tcp6Table, "tcp", map[uint64]string{5001: "tcp [::]:8090", 5002: "tcp [::1]:3600"}},
		{"udp", udpTable, "udp", map[uint64]string{6001: "udp 0.0.0.0:53"}},
		{"header only", "  sl  local_address rem_address   st\n", "tcp", map[uint64]string{}},
		{"garbage", "0: zz:1 00:0 0A a b c d e 7\n1: 0100007F:1F98 x 0A a b c d e notanumber\n", "tcp", map[uint64]string{}},
	} {
		if got := parseNetSockets([]byte(c.table), c.proto); !maps.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// FuzzParseNetSockets: any table is read without a panic, and what it
// gives is always "tcp ADDR:PORT" or "udp ADDR:PORT" for a non-zero inode.
func FuzzParseNetSockets(f *testing.F) {
	f.Add([]byte(tcpTable), false)
	f.Add([]byte(tcp6Table), false)
	f.Add([]byte(udpTable), true)
	f.Fuzz(func(t *testing.T, table []byte, udp bool) {
		proto := "tcp"
		if udp {
			proto = "udp"
		}
		for ino, s := range parseNetSockets(table, proto) {
			if ino == 0 || !strings.HasPrefix(s, proto+" ") || !strings.Contains(s, ":") {
				t.Errorf("%q: inode %d → %q", table, ino, s)
			}
		}
	})
}

// TestAttached: an exec's own process (PPID 0) and its descendants are
// attached; a process whose parent chain reaches PID 1 (it was orphaned or
// daemonized) or a process of the environment is detached; a loop of
// parents (PIDs reused during the listing) ends.
func TestAttached(t *testing.T) {
	ps := []Proc{
		{PID: 100, PPID: 0},   // an agent's exec
		{PID: 101, PPID: 100}, // its tool shell
		{PID: 102, PPID: 101}, // a command of the shell
		{PID: 200, PPID: 1},   // a daemon the agent left
		{PID: 201, PPID: 200}, // its worker
		{PID: 300, PPID: 50},  // a child of an environment's process (50, not listed)
		{PID: 400, PPID: 401}, // a loop
		{PID: 401, PPID: 400},
	}
	var got []int
	for _, p := range attached(ps, nil) {
		got = append(got, p.PID)
	}
	if want := []int{100, 101, 102}; !slices.Equal(got, want) {
		t.Errorf("attached %v, want %v", got, want)
	}
}
