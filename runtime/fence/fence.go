// Package fence keeps trial containers away from the machine they run on.
//
// A container on a bridge network reaches every address of its host: the
// bridge's gateway address, docker0's, the host's own interfaces, and with
// them any service the host listens on at all addresses. Docker's own
// rules guard forwarding between networks, not traffic to the host itself.
// The fence is one nftables table, "inet troupe", that refuses what enters
// the host from a trial bridge (every bridge troupe makes is named with
// BridgePrefix) except DNS and replies to connections the host opened, and
// refuses forwarding from a trial bridge to link-local addresses (cloud
// metadata services at 169.254.169.254 among them).
//
// Install runs in the host's network namespace with CAP_NET_ADMIN; the
// Docker backend runs it there through a short-lived helper container
// (host network, NET_ADMIN), so it needs nothing of the machine beyond
// what Docker has: a kernel with nf_tables (Linux 3.13 and later, every
// distribution's default).
package fence

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// BridgePrefix starts the name of every bridge interface troupe makes for
// trials; the fence matches interfaces by it.
const BridgePrefix = "trp"

// Table is the nftables table the fence owns, in the inet family (IPv4
// and IPv6 alike).
const Table = "troupe"

// Install replaces the fence table with its current rules, in one atomic
// batch: concurrent troupe processes each install the same table, and a
// table of an older troupe is replaced whole. netns, when not -1, is a
// file descriptor of the network namespace to install into (tests);
// -1 is the caller's own.
func Install(netns int) error {
	var opts []nftables.ConnOption
	if netns >= 0 {
		opts = append(opts, nftables.WithNetNSFd(netns))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("fence: open netlink: %w", err)
	}
	defer c.CloseLasting()
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: Table}
	// Add, delete and add again: the delete then never fails for a table
	// that was not there, and the new table replaces any old one whole.
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	for _, exprs := range inputRules() {
		c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: exprs})
	}
	for _, exprs := range forwardRules() {
		c.AddRule(&nftables.Rule{Table: t, Chain: forward, Exprs: exprs})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("fence: install nftables table inet %s (needs CAP_NET_ADMIN and a kernel with nf_tables): %w", Table, err)
	}
	return nil
}

// inputRules: traffic from a trial bridge to the host itself. Replies to
// connections the host opened pass, DNS passes (a host resolver on a bridge
// address), TCP is reset (a connect fails at once), the rest is refused
// with "administratively prohibited".
func inputRules() [][]expr.Any {
	return [][]expr.Any{
		append(fromTrial(), established(verdict(expr.VerdictAccept))...),
		append(fromTrial(), dns(unix.IPPROTO_UDP)...),
		append(fromTrial(), dns(unix.IPPROTO_TCP)...),
		append(fromTrial(), l4(unix.IPPROTO_TCP, &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})...),
		append(fromTrial(), &expr.Counter{}, adminProhibited()),
	}
}

// forwardRules: traffic from a trial bridge to link-local addresses, on
// any interface, is refused.
func forwardRules() [][]expr.Any {
	_, v4, _ := net.ParseCIDR("169.254.0.0/16")
	_, v6, _ := net.ParseCIDR("fe80::/10")
	return [][]expr.Any{
		append(fromTrial(), toNet(unix.NFPROTO_IPV4, 16, v4)...),
		append(fromTrial(), toNet(unix.NFPROTO_IPV6, 24, v6)...),
	}
}

// fromTrial matches packets that came in on a trial bridge: the interface
// name compared on its first bytes only, as nft's "trp*" is.
func fromTrial() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(BridgePrefix)},
	}
}

func established(then ...expr.Any) []expr.Any {
	zero := binaryutil.NativeEndian.PutUint32(0)
	return append([]expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: zero},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: zero},
	}, then...)
}

func l4(proto byte, then ...expr.Any) []expr.Any {
	return append([]expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}, then...)
}

func dns(proto byte) []expr.Any {
	port := make([]byte, 2)
	binary.BigEndian.PutUint16(port, 53)
	return l4(proto,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port},
		verdict(expr.VerdictAccept))
}

// toNet refuses packets of family (an NFPROTO) whose destination address,
// at offset in the network header, is in n.
func toNet(family byte, offset uint32, n *net.IPNet) []expr.Any {
	addr := n.IP.To4()
	if family == unix.NFPROTO_IPV6 {
		addr = n.IP.To16()
	}
	mask := []byte(n.Mask)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{family}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(addr))},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(addr)), Mask: mask, Xor: make([]byte, len(addr))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr},
		&expr.Counter{},
		adminProhibited(),
	}
}

func verdict(k expr.VerdictKind) expr.Any { return &expr.Verdict{Kind: k} }

func adminProhibited() expr.Any {
	return &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}
}
