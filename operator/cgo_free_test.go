package operator_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The operator core, the API and the UI build without cgo (CGO_ENABLED=0): none of them
// depends on the resend package, whose producer is librdkafka's (cgo), nor on the bindings
// themselves. The core takes the resender through operator.Resender.
func TestTranslatorsBuildWithoutCgo(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(goBin, "list", "-deps", "github.com/redrive/redrive/operator",
		"github.com/redrive/redrive/api", "github.com/redrive/redrive/web")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "github.com/redrive/redrive/resend", "github.com/redrive/redrive/internal/kafkalog",
			"github.com/confluentinc/confluent-kafka-go/v2/kafka":
			t.Errorf("api, web or operator depends on %s, which needs cgo", pkg)
		}
	}
}
