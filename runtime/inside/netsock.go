//go:build linux

package inside

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
)

// Socket states of /proc/net/tcp and udp (the kernel's TCP states).
const (
	tcpListen = "0A"
	udpBound  = "07" // TCP_CLOSE: a UDP socket bound and not connected
)

// parseNetSockets reads a /proc/net/{tcp,tcp6,udp,udp6} table and maps
// the inode of each listening socket (TCP in LISTEN; UDP bound and
// unconnected) to "PROTO ADDR:PORT". Lines it cannot read are skipped.
//
// Each line is "sl: local rem st tx:rx tr:when retrnsmt uid timeout
// inode ...", local and rem in hex, the address as the kernel holds it:
// 32-bit words in the host's order (little-endian on the machines troupe
// runs on), the port big-endian.
func parseNetSockets(data []byte, proto string) map[uint64]string {
	out := map[uint64]string{}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 10 || !strings.HasSuffix(f[0], ":") {
			continue // the header, or not a socket's line
		}
		want := tcpListen
		if proto == "udp" {
			want = udpBound
		}
		if f[3] != want {
			continue
		}
		addr, ok := parseHexAddr(f[1])
		if !ok {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		out[ino] = proto + " " + addr.String()
	}
	return out
}

// parseHexAddr reads "0100007F:1F90" (IPv4) or a 32-digit IPv6 address
// and its port.
func parseHexAddr(s string) (netip.AddrPort, bool) {
	host, port, ok := strings.Cut(s, ":")
	if !ok || len(port) != 4 || len(host) != 8 && len(host) != 32 {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(host)
	if err != nil {
		return netip.AddrPort{}, false
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	// Each 32-bit word is in the host's order: turn it to the network's.
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(p)), true
}
