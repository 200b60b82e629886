//go:build linux

package inside

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// routeHeader is /proc/net/route's first line, as Linux prints it.
const routeHeader = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT                                                       \n"

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestLinkParseRoutes(t *testing.T) {
	for _, c := range []struct {
		name  string
		table string
		want  []Route
		err   string
	}{
		{"a Docker bridge container", routeHeader +
			"eth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0                                                                               \n" +
			"eth0\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0                                                                               \n",
			[]Route{
				{Interface: "eth0", Destination: addr("0.0.0.0"), Gateway: addr("172.18.0.1"), Mask: addr("0.0.0.0"), Flags: 3},
				{Interface: "eth0", Destination: addr("172.18.0.0"), Gateway: addr("0.0.0.0"), Mask: addr("255.255.0.0"), Flags: 1},
			}, ""},
		{"a host route with a metric", routeHeader +
			"wlan0\t0100A8C0\t00000000\t0005\t0\t0\t600\tFFFFFFFF\t0\t0\t0\n",
			[]Route{{Interface: "wlan0", Destination: addr("192.168.0.1"), Gateway: addr("0.0.0.0"), Mask: addr("255.255.255.255"), Flags: 5, Metric: 600}}, ""},
		{"no routes", routeHeader, []Route{}, ""},
		{"columns in another order", "Mask Metric Flags Gateway Destination Iface\n00FFFFFF 100 0001 00000000 0000000A eth1\n",
			[]Route{{Interface: "eth1", Destination: addr("10.0.0.0"), Gateway: addr("0.0.0.0"), Mask: addr("255.255.255.0"), Flags: 1, Metric: 100}}, ""},
		{"blank lines", routeHeader + "\n  \neth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\n",
			[]Route{{Interface: "eth0", Destination: addr("0.0.0.0"), Gateway: addr("172.17.0.1"), Mask: addr("0.0.0.0"), Flags: 3}}, ""},
		{"empty", "", nil, "no Iface column"},
		{"no mask column", "Iface Destination Gateway Flags Metric\n", nil, "no Mask column"},
		{"a short address", routeHeader + "eth0\t0000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n", nil, "line 2: destination"},
		{"not hex", routeHeader + "eth0\t00000000\tZZ000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n", nil, "gateway"},
		{"a line cut short", routeHeader + "eth0\t00000000\t00000000\t0001\n", nil, "line 2: 4 fields"},
		{"a negative metric", routeHeader + "eth0\t00000000\t00000000\t0001\t0\t0\t-1\t00000000\t0\t0\t0\n", nil, "metric"},
		{"not an interface name", routeHeader + "a/b\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n", nil, "not an interface name"},
		{"flags too big", routeHeader + "eth0\t00000000\t00000000\t10001\t0\t0\t0\t00000000\t0\t0\t0\n", nil, "flags"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRoutes([]byte(c.table))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("error %v; want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.Routes, c.want) {
				t.Errorf("ParseRoutes = %+v, %v; want %+v", got.Routes, err, c.want)
			}
		})
	}
}

// TestLinkRoutesJSON: the form the backend keeps between link down and up,
// and what link up accepts back.
func TestLinkRoutesJSON(t *testing.T) {
	routes := Routes{Routes: []Route{{Interface: "eth0", Destination: addr("0.0.0.0"), Gateway: addr("172.18.0.1"), Mask: addr("0.0.0.0"), Flags: 3, Metric: 7}}}
	data, err := json.Marshal(routes)
	want := `{"routes":[{"interface":"eth0","destination":"0.0.0.0","gateway":"172.18.0.1","mask":"0.0.0.0","flags":3,"metric":7}]}`
	if err != nil || string(data) != want {
		t.Fatalf("JSON %s, %v; want %s", data, err, want)
	}
	var back Routes
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, routes) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	none, _ := ParseRoutes([]byte(routeHeader))
	if data, _ := json.Marshal(none); string(data) != `{"routes":[]}` {
		t.Errorf("no routes are %s", data)
	}
}

// TestLinkRouteCheck: link up refuses what SIOCADDRT could not take.
func TestLinkRouteCheck(t *testing.T) {
	good := Route{Interface: "eth0", Destination: addr("0.0.0.0"), Gateway: addr("10.0.0.1"), Mask: addr("0.0.0.0"), Flags: 3}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*Route){
		"no interface":          func(r *Route) { r.Interface = "" },
		"a long interface":      func(r *Route) { r.Interface = strings.Repeat("e", 16) },
		"a path":                func(r *Route) { r.Interface = "../eth0" },
		"no destination":        func(r *Route) { r.Destination = netip.Addr{} },
		"an IPv6 gateway":       func(r *Route) { r.Gateway = addr("fe80::1") },
		"no mask":               func(r *Route) { r.Mask = netip.Addr{} },
		"a negative metric":     func(r *Route) { r.Metric = -1 },
		"a metric over a short": func(r *Route) { r.Metric = maxMetric + 1 },
	} {
		r := good
		bad(&r)
		if err := r.check(); err == nil {
			t.Errorf("%s: %+v passed", name, r)
		}
	}
	var fromJSON Routes
	if err := json.Unmarshal([]byte(`{"routes":[{"interface":"eth0","gateway":"10.0.0.1","mask":"0.0.0.0"}]}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := fromJSON.Routes[0].check(); err == nil {
		t.Error("a route without a destination passed")
	}
}

// TestLinkRtentryLayout: the struct SIOCADDRT reads is the kernel's
// struct rtentry; a field off by a byte would add a wrong route.
func TestLinkRtentryLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the offsets below are those of 64-bit Linux")
	}
	var rt rtentry
	for _, c := range []struct {
		field     string
		got, want uintptr
	}{
		{"rt_dst", unsafe.Offsetof(rt.dst), 8},
		{"rt_gateway", unsafe.Offsetof(rt.gateway), 24},
		{"rt_genmask", unsafe.Offsetof(rt.genmask), 40},
		{"rt_flags", unsafe.Offsetof(rt.flags), 56},
		{"rt_pad3", unsafe.Offsetof(rt.pad3), 64},
		{"rt_metric", unsafe.Offsetof(rt.metric), 80},
		{"rt_dev", unsafe.Offsetof(rt.dev), 88},
		{"rt_mtu", unsafe.Offsetof(rt.mtu), 96},
		{"rt_irtt", unsafe.Offsetof(rt.irtt), 112},
		{"sizeof", unsafe.Sizeof(rt), 120},
	} {
		if c.got != c.want {
			t.Errorf("%s at %d; the kernel's is at %d", c.field, c.got, c.want)
		}
	}
}

func TestLinkRouteString(t *testing.T) {
	for _, c := range []struct {
		r    Route
		want string
	}{
		{Route{Interface: "eth0", Destination: addr("0.0.0.0"), Gateway: addr("172.18.0.1"), Mask: addr("0.0.0.0"), Flags: 3}, "0.0.0.0/0 dev eth0 via 172.18.0.1"},
		{Route{Interface: "eth0", Destination: addr("172.18.0.0"), Gateway: addr("0.0.0.0"), Mask: addr("255.255.0.0"), Flags: 1, Metric: 5}, "172.18.0.0/16 dev eth0 metric 5"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%q; want %q", got, c.want)
		}
	}
}

// TestLinkTerminationMessage: written when the file is there, silently
// skipped when it is not (outside Kubernetes).
func TestLinkTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "termination-log")
	if err := WriteTerminationMessage(log, []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Errorf("a missing termination log was created: %v", err)
	}
	os.WriteFile(log, []byte("an older, longer message\n"), 0o644)
	if err := WriteTerminationMessage(log, []byte(`{"routes":[]}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(log); string(data) != `{"routes":[]}`+"\n" {
		t.Errorf("termination log holds %q", data)
	}
	if err := WriteTerminationMessage(dir, []byte("x")); err == nil {
		t.Error("writing to a folder gave no error")
	}
}

// FuzzParseRoutes: any table either parses into IPv4 routes whose JSON
// reads back the same, or is refused; it never panics.
func FuzzParseRoutes(f *testing.F) {
	f.Add([]byte(routeHeader + "eth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"))
	f.Add([]byte(routeHeader))
	f.Add([]byte("Mask Metric Flags Gateway Destination Iface\n00FFFFFF 100 0001 00000000 0000000A eth1\n"))
	f.Add([]byte(""))
	f.Add([]byte("Iface Destination Gateway Flags Metric Mask\neth0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		routes, err := ParseRoutes(data)
		if err != nil {
			return
		}
		if routes.Routes == nil {
			t.Fatal("parsed routes are null in JSON")
		}
		for _, r := range routes.Routes {
			if !r.Destination.Is4() || !r.Gateway.Is4() || !r.Mask.Is4() || r.Interface == "" || r.Metric < 0 {
				t.Fatalf("a route that is not one: %+v", r)
			}
		}
		js, err := json.Marshal(routes)
		if err != nil {
			t.Fatal(err)
		}
		var back Routes
		if err := json.Unmarshal(js, &back); err != nil || !reflect.DeepEqual(back, routes) {
			t.Fatalf("JSON round trip of %s: %+v, %v", js, back, err)
		}
	})
}
