//go:build linux

package inside

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Routes is what troupe link down takes away and troupe link up puts back:
// the IPv4 routes of a network namespace's non-loopback interfaces. Its
// JSON is one object, never null:
//
//	{"routes":[{"interface":"eth0","destination":"0.0.0.0","gateway":"172.18.0.1","mask":"0.0.0.0","flags":3,"metric":0}]}
//
// and {"routes":[]} when there are none. A backend keeps it between the
// two commands (Kubernetes: the container's termination message).
type Routes struct {
	Routes []Route `json:"routes"`
}

// Route is one line of /proc/net/route. Gateway is 0.0.0.0 for a route
// to a subnet the interface is on; Flags are the kernel's RTF_ bits
// (1 up, 2 gateway, 4 host); Metric is the route's priority.
type Route struct {
	Interface   string     `json:"interface"`
	Destination netip.Addr `json:"destination"`
	Gateway     netip.Addr `json:"gateway"`
	Mask        netip.Addr `json:"mask"`
	Flags       uint16     `json:"flags"`
	Metric      int        `json:"metric"`
}

// TerminationLog is where Kubernetes takes a container's termination
// message from: troupe link writes its Routes there too, so that the
// backend reads them in the container's status.
const TerminationLog = "/dev/termination-log"

// routeTable is the kernel's IPv4 main routing table of the reader's
// network namespace.
const routeTable = "/proc/net/route"

// maxMetric is the largest metric SIOCADDRT can set: it takes a short,
// one more than the metric.
const maxMetric = 1<<15 - 2

// LinkDown cuts the network namespace off: it reads the routes of every
// non-loopback interface, then sets each of them down, which takes those
// routes out of the kernel's table. It runs with CAP_NET_ADMIN beside a
// container that has none, so the container cannot undo it. An interface
// already down is left so; a second call finds no routes left to report.
// The routes read are returned even when setting an interface down failed:
// they are what LinkUp needs to restore what did go down.
func LinkDown() (Routes, error) {
	links, err := nonLoopback()
	if err != nil {
		return Routes{Routes: []Route{}}, err
	}
	routes, err := readRoutes(links)
	if err != nil {
		return Routes{Routes: []Route{}}, err
	}
	return routes, setLinks(links, false)
}

// LinkUp undoes LinkDown: it sets every non-loopback interface and every
// interface the routes name up, then adds the routes, those without a
// gateway first (a gateway must be reachable when its route is added). A
// route that is already there (the kernel restores an interface's own
// subnet when it comes up) is not an error. It returns the routes the
// table then holds.
func LinkUp(want Routes) (Routes, error) {
	for _, r := range want.Routes {
		if err := r.check(); err != nil {
			return Routes{Routes: []Route{}}, err
		}
	}
	links, err := nonLoopback()
	if err != nil {
		return Routes{Routes: []Route{}}, err
	}
	for _, r := range want.Routes {
		if !slices.Contains(links, r.Interface) {
			links = append(links, r.Interface)
		}
	}
	if err := setLinks(links, true); err != nil {
		return Routes{Routes: []Route{}}, err
	}
	if err := addRoutes(want.Routes); err != nil {
		return Routes{Routes: []Route{}}, err
	}
	return readRoutes(links)
}

// check refuses a route SIOCADDRT could not take as it is.
func (r Route) check() error {
	if err := checkInterface(r.Interface); err != nil {
		return fmt.Errorf("route %v: %w", r, err)
	}
	for _, a := range []netip.Addr{r.Destination, r.Gateway, r.Mask} {
		if !a.Is4() {
			return fmt.Errorf("route %v: %q is not an IPv4 address", r, a)
		}
	}
	if r.Metric < 0 || r.Metric > maxMetric {
		return fmt.Errorf("route %v: metric %d is outside 0 to %d", r, r.Metric, maxMetric)
	}
	return nil
}

// checkInterface refuses what Linux would not take as an interface name
// (dev_valid_name), and names JSON cannot carry (not UTF-8).
func checkInterface(name string) error {
	if name == "" || name == "." || name == ".." || len(name) >= unix.IFNAMSIZ ||
		strings.ContainsAny(name, "/:\x00") || strings.ContainsFunc(name, unicode.IsSpace) || !utf8.ValidString(name) {
		return fmt.Errorf("%q is not an interface name", name)
	}
	return nil
}

// nonLoopback names the namespace's interfaces but loopback ones.
func nonLoopback() ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list the network interfaces: %w", err)
	}
	var names []string
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			names = append(names, i.Name)
		}
	}
	return names, nil
}

// readRoutes reads the kernel's table and keeps the routes of links.
func readRoutes(links []string) (Routes, error) {
	data, err := os.ReadFile(routeTable)
	if err != nil {
		return Routes{Routes: []Route{}}, fmt.Errorf("read the routes: %w", err)
	}
	all, err := ParseRoutes(data)
	if err != nil {
		return Routes{Routes: []Route{}}, err
	}
	all.Routes = slices.DeleteFunc(all.Routes, func(r Route) bool { return !slices.Contains(links, r.Interface) })
	return all, nil
}

// ParseRoutes reads /proc/net/route: a header naming the columns, then a
// line per route whose addresses are the hex of the address's four bytes
// read as a native-endian word (little-endian on amd64: 0100A8C0 is
// 192.168.0.1). Columns are found by their header names, so a kernel that
// adds one does not break it.
func ParseRoutes(data []byte) (Routes, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	col := map[string]int{}
	for i, name := range strings.Fields(lines[0]) {
		col[name] = i
	}
	for _, name := range []string{"Iface", "Destination", "Gateway", "Flags", "Metric", "Mask"} {
		if _, ok := col[name]; !ok {
			return Routes{Routes: []Route{}}, fmt.Errorf("%s: no %s column in %q", routeTable, name, lines[0])
		}
	}
	routes := Routes{Routes: []Route{}}
	for n, line := range lines[1:] {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		r, err := parseRoute(fields, col)
		if err != nil {
			return Routes{Routes: []Route{}}, fmt.Errorf("%s line %d: %w", routeTable, n+2, err)
		}
		routes.Routes = append(routes.Routes, r)
	}
	return routes, nil
}

// parseRoute reads one line's fields, at the columns col names.
func parseRoute(fields []string, col map[string]int) (Route, error) {
	for _, i := range col {
		if i >= len(fields) {
			return Route{}, fmt.Errorf("%d fields, fewer than the header's columns", len(fields))
		}
	}
	field := func(name string) string { return fields[col[name]] }
	var r Route
	var err error
	r.Interface = field("Iface")
	if err := checkInterface(r.Interface); err != nil {
		return Route{}, err
	}
	if r.Destination, err = hexAddr(field("Destination")); err != nil {
		return Route{}, fmt.Errorf("destination: %w", err)
	}
	if r.Gateway, err = hexAddr(field("Gateway")); err != nil {
		return Route{}, fmt.Errorf("gateway: %w", err)
	}
	if r.Mask, err = hexAddr(field("Mask")); err != nil {
		return Route{}, fmt.Errorf("mask: %w", err)
	}
	flags, err := strconv.ParseUint(field("Flags"), 16, 16)
	if err != nil {
		return Route{}, fmt.Errorf("flags: %w", err)
	}
	r.Flags = uint16(flags)
	if r.Metric, err = strconv.Atoi(field("Metric")); err != nil || r.Metric < 0 {
		return Route{}, fmt.Errorf("metric %q is not a number of 0 or more", field("Metric"))
	}
	return r, nil
}

// hexAddr reads an address as the kernel prints a __be32: %08X of the
// word, so its bytes in memory order are the address's.
func hexAddr(s string) (netip.Addr, error) {
	if len(s) != 8 {
		return netip.Addr{}, fmt.Errorf("%q is not 8 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not 8 hex digits", s)
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(v))
	return netip.AddrFrom4(b), nil
}

// setLinks sets each interface up or down, as ip link set does, with the
// SIOCGIFFLAGS and SIOCSIFFLAGS ioctls: the images troupe link runs from
// have no ip command. One already so is left alone.
func setLinks(names []string, up bool) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open a socket for interface ioctls: %w", err)
	}
	defer unix.Close(fd)
	var errs []error
	for _, name := range names {
		errs = append(errs, setLink(fd, name, up))
	}
	return errors.Join(errs...)
}

func setLink(fd int, name string, up bool) error {
	state := map[bool]string{true: "up", false: "down"}[up]
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("set %s %s: %w", name, state, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set %s %s: read its flags: %w", name, state, err)
	}
	flags := ifr.Uint16()
	want := flags &^ unix.IFF_UP
	if up {
		want = flags | unix.IFF_UP
	}
	if want == flags {
		return nil
	}
	ifr.SetUint16(want)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set %s %s: %w%s", name, state, err, needsNetAdmin(err))
	}
	return nil
}

// needsNetAdmin adds a hint to a permission error.
func needsNetAdmin(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return " (troupe link needs the NET_ADMIN capability)"
	}
	return ""
}

// rtentry is the kernel's struct rtentry (include/uapi/linux/route.h), the
// argument of SIOCADDRT, which x/sys/unix does not define. Go lays it out
// as C does: uint and uintptr are unsigned long and a pointer on Linux,
// and the padding after flags, metric and irtt falls where C's does (120
// bytes on amd64; link_test.go checks the offsets).
type rtentry struct {
	pad1    uint
	dst     unix.RawSockaddrInet4
	gateway unix.RawSockaddrInet4
	genmask unix.RawSockaddrInet4
	flags   uint16
	pad2    int16
	pad3    uint
	pad4    uintptr
	metric  int16
	dev     *byte
	mtu     uint
	window  uint
	irtt    uint16
}

// addRoutes adds routes to the kernel's table, those without a gateway
// first; one already there is not an error.
func addRoutes(routes []Route) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open a socket for route ioctls: %w", err)
	}
	defer unix.Close(fd)
	ordered := slices.Clone(routes)
	slices.SortStableFunc(ordered, func(a, b Route) int {
		return cmp.Compare(a.Flags&unix.RTF_GATEWAY, b.Flags&unix.RTF_GATEWAY)
	})
	for _, r := range ordered {
		if err := addRoute(fd, r); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add the route %s: %w%s", r, err, needsNetAdmin(err))
		}
	}
	return nil
}

func addRoute(fd int, r Route) error {
	dev, err := unix.BytePtrFromString(r.Interface)
	if err != nil {
		return err
	}
	rt := rtentry{
		dst:     sockaddr(r.Destination),
		gateway: sockaddr(r.Gateway),
		genmask: sockaddr(r.Mask),
		flags:   unix.RTF_UP | r.Flags&(unix.RTF_GATEWAY|unix.RTF_HOST),
		// The kernel takes one off: 0 means "no metric given".
		metric: int16(r.Metric + 1),
		dev:    dev,
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCADDRT, uintptr(unsafe.Pointer(&rt))); errno != 0 {
		return errno
	}
	return nil
}

func sockaddr(a netip.Addr) unix.RawSockaddrInet4 {
	return unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.As4()}
}

// String is the route as ip route prints it, for messages.
func (r Route) String() string {
	ones := 0
	for _, b := range r.Mask.AsSlice() {
		ones += bits.OnesCount8(b)
	}
	s := fmt.Sprintf("%s/%d dev %s", r.Destination, ones, r.Interface)
	if r.Flags&unix.RTF_GATEWAY != 0 {
		s += " via " + r.Gateway.String()
	}
	if r.Metric != 0 {
		s += " metric " + strconv.Itoa(r.Metric)
	}
	return s
}

// WriteTerminationMessage writes msg to the file at path when it exists
// and may be written: Kubernetes' termination log, which is absent outside
// Kubernetes and may be read-only. Anything else failing is an error.
func WriteTerminationMessage(path string, msg []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write the termination message: %w", err)
	}
	_, err = f.Write(msg)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the termination message: %w", err)
	}
	return nil
}
