package intake

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
)

// stackNormalisers rewrite the parts of a Java stack trace that differ between two failures of
// the same bug (besides line numbers, which withoutLineNumbers removes): the numbered suffixes of lambdas, proxies and generated classes,
// memory addresses, identity hashes and JDK module versions.
//
// Each applies only to a line that contains its trigger: most lines hold none but the first.
var stackNormalisers = []struct {
	trigger string
	re      *regexp.Regexp
	with    string
}{
	{"$$Lambda", regexp.MustCompile(`\$\$Lambda[^.(\s]*`), "$$$$Lambda"},                  // $$Lambda$14/0x00000008000c4b40, $$Lambda/0x...
	{"$Proxy", regexp.MustCompile(`\$Proxy\d+`), "$$Proxy"},                               // com.sun.proxy.$Proxy123
	{"jdk.proxy", regexp.MustCompile(`jdk\.proxy\d+`), "jdk.proxy"},                       // jdk.proxy2.$Proxy45
	{"CGLIB$$", regexp.MustCompile(`\$\$(\w*?)CGLIB\$\$\w+`), "$$$$${1}CGLIB"},            // $$EnhancerBySpringCGLIB$$1a2b3c, $$SpringCGLIB$$0
	{"Accessor", regexp.MustCompile(`(Generated\w*Accessor)\d+`), "$1"},                   // GeneratedMethodAccessor123
	{"$HibernateProxy$", regexp.MustCompile(`\$HibernateProxy\$\w+`), "$$HibernateProxy"}, // $HibernateProxy$AbC12
	{"$ByteBuddy$", regexp.MustCompile(`\$ByteBuddy\$\w+`), "$$ByteBuddy"},
	{"$MockitoMock$", regexp.MustCompile(`\$MockitoMock\$\w+`), "$$MockitoMock"},
	{"0x", regexp.MustCompile(`0x[0-9a-fA-F]+`), "0x"},                                  // memory addresses
	{"@", regexp.MustCompile(`@[0-9a-fA-F]{4,}\b`), "@"},                                // Object.toString identity hashes
	{"@", regexp.MustCompile(`@[0-9][\w.+-]*/`), "/"},                                   // java.base@17.0.2/
	{"... ", regexp.MustCompile(`^\.\.\. \d+ (more|common frames omitted)$`), "... $1"}, // ... 12 more
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
		line = withoutLineNumbers(line)
		for _, n := range stackNormalisers {
			if strings.Contains(line, n.trigger) {
				line = n.re.ReplaceAllString(line, n.with)
			}
		}
		out = append(out, line)
	}
	return out
}

// withoutLineNumbers removes the line numbers of a frame: "(Foo.java:42)" becomes "(Foo.java)".
func withoutLineNumbers(line string) string {
	if !strings.Contains(line, ":") {
		return line
	}
	var b strings.Builder
	rest := line
	for {
		i := strings.Index(rest, ":")
		if i < 0 {
			break
		}
		j := i + 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j > i+1 && j < len(rest) && rest[j] == ')' {
			b.WriteString(rest[:i])
		} else {
			b.WriteString(rest[:j])
		}
		rest = rest[j:]
	}
	b.WriteString(rest)
	return b.String()
}

// traceHashes remembers the hashes of recent stack traces: the failures of one bug mostly carry
// the same trace, and normalising one costs tens of microseconds. It is safe for concurrent
// use; a nil *traceHashes computes every hash.
type traceHashes struct {
	mu     sync.Mutex
	hashes map[string]*string
}

// maxTraceHashes bounds the traces a traceHashes remembers; it forgets them all when full.
const maxTraceHashes = 4096

// hash returns stackTraceHash(trace), from memory when it can.
func (c *traceHashes) hash(trace string) *string {
	if c == nil {
		return stackTraceHash(trace)
	}
	c.mu.Lock()
	h, ok := c.hashes[trace]
	c.mu.Unlock()
	if ok {
		return h
	}
	h = stackTraceHash(trace)
	c.mu.Lock()
	if c.hashes == nil || len(c.hashes) >= maxTraceHashes {
		c.hashes = make(map[string]*string)
	}
	c.hashes[strings.Clone(trace)] = h
	c.mu.Unlock()
	return h
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
