package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrBlockedTarget means a webhook's address is link-local, unspecified or a cloud metadata
// service, and Config.AllowLinkLocal is off. Such addresses reach the machine's own
// credentials (169.254.169.254 and its kin), never a receiver of notifications.
var ErrBlockedTarget = errors.New("link-local or cloud metadata address")

// ErrRedirect means a receiver answered with a redirect. Deliveries never follow one: a
// signed body and its signature go only to the configured URL.
var ErrRedirect = errors.New("redirect not followed")

// blockedPrefixes are the ranges a webhook may not reach without Config.AllowLinkLocal.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local: AWS, GCP, Azure, OpenStack metadata, ECS task credentials
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6
	netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud Infrastructure classic metadata
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network": 0.0.0.0 reaches the machine itself
	netip.MustParsePrefix("::/128"),             // unspecified
}

// blockedHosts are the names of metadata services (compared without a trailing dot, in lower
// case).
var blockedHosts = []string{"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal",
	"metadata.azure.com", "metadata.platformequinix.com"}

// blockedAddr reports whether ip is in a blocked range (IPv4-mapped IPv6 addresses count as
// their IPv4 address).
func blockedAddr(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// checkTarget refuses a URL host that is a blocked address or a metadata service's name. A
// name that resolves to a blocked address is refused when a delivery dials it (dialControl).
func checkTarget(host string) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		if blockedAddr(ip) {
			return fmt.Errorf("%w: %s", ErrBlockedTarget, host)
		}
		return nil
	}
	for _, b := range blockedHosts {
		if h == b {
			return fmt.Errorf("%w: %s", ErrBlockedTarget, host)
		}
	}
	return nil
}

// dialControl refuses, at the moment of connecting, an address in a blocked range: whatever a
// name resolved to (DNS rebinding included), a delivery never reaches one.
func dialControl(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not host:port", ErrBlockedTarget, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address", ErrBlockedTarget, host)
	}
	if blockedAddr(ip) {
		return fmt.Errorf("%w: %s", ErrBlockedTarget, ip)
	}
	return nil
}

// noRedirects makes a client hand back a redirect as the answer instead of following it.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// newHTTPClient returns the client of deliveries: timeout per request, no redirects followed,
// and (unless allowLinkLocal) no connection to a blocked address. It honours the proxy
// environment variables (HTTPS_PROXY, NO_PROXY); through a proxy the dial-time check applies
// to the proxy's address, the start-time check (New) to the webhook's.
func newHTTPClient(timeout time.Duration, allowLinkLocal bool) *http.Client {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowLinkLocal {
		d.Control = dialControl
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Timeout: timeout, Transport: t, CheckRedirect: noRedirects}
}
