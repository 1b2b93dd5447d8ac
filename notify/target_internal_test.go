package notify

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The check at dial time sees the address a name resolved to, whatever the URL said: a
// delivery never connects to a blocked address (DNS rebinding included), and connects
// elsewhere as before.
func TestDialTimeCheck(t *testing.T) {
	t.Parallel()
	c := newHTTPClient(2*time.Second, false)
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/", "http://[fe80::1]/",
		"http://100.100.100.200/", "http://[fd00:ec2::254]/", "http://0.0.0.0:9/"} {
		resp, err := c.Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrBlockedTarget) {
			t.Errorf("%s: %v, want ErrBlockedTarget", u, err)
		}
		if got := errorKind(err); !strings.Contains(got, "link-local or a cloud metadata") {
			t.Errorf("%s: logged as %q", u, got)
		}
	}
	for ip, blocked := range map[string]bool{"169.254.170.2:80": true, "[fe80::1%lo]:80": true, "127.0.0.1:80": false,
		"10.1.2.3:443": false, "[2001:db8::1]:443": false, "192.0.0.192:80": true} {
		if err := dialControl("tcp", ip, nil); (err != nil) != blocked {
			t.Errorf("dialControl(%s) = %v, want blocked %v", ip, err, blocked)
		}
	}
	// Allowed, the same client shape connects (here: to nothing listening, refused by the
	// kernel, not by the check).
	_, err := newHTTPClient(2*time.Second, true).Post("http://169.254.169.254:1/", "application/json", strings.NewReader("{}"))
	if errors.Is(err, ErrBlockedTarget) {
		t.Errorf("allowed, still blocked: %v", err)
	}
	if newHTTPClient(time.Second, false).CheckRedirect(&http.Request{}, nil) != http.ErrUseLastResponse {
		t.Error("the client follows redirects")
	}
}
