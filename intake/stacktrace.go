package intake

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// stackNormalisers rewrite the parts of a Java stack trace that differ between two failures of
// the same bug: line numbers, the numbered suffixes of lambdas, proxies and generated classes,
// memory addresses, identity hashes and JDK module versions.
var stackNormalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`:\d+\)`), ")"},                                           // (Foo.java:42)
	{regexp.MustCompile(`\$\$Lambda[^.(\s]*`), "$$$$Lambda"},                      // $$Lambda$14/0x00000008000c4b40, $$Lambda/0x...
	{regexp.MustCompile(`\$Proxy\d+`), "$$Proxy"},                                 // com.sun.proxy.$Proxy123
	{regexp.MustCompile(`jdk\.proxy\d+`), "jdk.proxy"},                            // jdk.proxy2.$Proxy45
	{regexp.MustCompile(`\$\$(\w*?)CGLIB\$\$\w+`), "$$$$${1}CGLIB"},               // $$EnhancerBySpringCGLIB$$1a2b3c, $$SpringCGLIB$$0
	{regexp.MustCompile(`(Generated\w*Accessor)\d+`), "$1"},                       // GeneratedMethodAccessor123
	{regexp.MustCompile(`\$(HibernateProxy|ByteBuddy|MockitoMock)\$\w+`), "$$$1"}, // $HibernateProxy$AbC12
	{regexp.MustCompile(`0x[0-9a-fA-F]+`), "0x"},                                  // memory addresses
	{regexp.MustCompile(`@[0-9a-fA-F]{4,}\b`), "@"},                               // Object.toString identity hashes
	{regexp.MustCompile(`@[0-9][\w.+-]*/`), "/"},                                  // java.base@17.0.2/
	{regexp.MustCompile(`^\.\.\. \d+ (more|common frames omitted)$`), "... $1"},   // ... 12 more
}

// normaliseStackTrace returns the lines of a Java stack trace that identify the bug: exception
// class names without their messages (the first line, "Caused by:" and "Suppressed:" lines),
// and the frames, each normalised (stackNormalisers).
func normaliseStackTrace(trace string) []string {
	var out []string
	for _, line := range strings.Split(trace, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "at ") && !strings.HasPrefix(line, "...") {
			// An exception line: "Caused by: x.Y: message" keeps "Caused by: x.Y".
			prefix := ""
			for _, p := range []string{"Caused by: ", "Suppressed: "} {
				if strings.HasPrefix(line, p) {
					prefix, line = p, line[len(p):]
				}
			}
			if i := strings.Index(line, ": "); i >= 0 {
				line = line[:i]
			}
			if strings.ContainsAny(line, " \t") { // not a class name: a message line of its own
				continue
			}
			line = prefix + line
		}
		for _, n := range stackNormalisers {
			line = n.re.ReplaceAllString(line, n.with)
		}
		out = append(out, line)
	}
	return out
}

// stackTraceHash returns the hex SHA-256 of the normalised stack trace, so that one bug is one
// group; nil for an empty trace.
func stackTraceHash(trace string) *string {
	lines := normaliseStackTrace(trace)
	if len(lines) == 0 {
		return nil
	}
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	h := hex.EncodeToString(sum[:])
	return &h
}
