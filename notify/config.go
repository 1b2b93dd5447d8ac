package notify

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// LoadWebhooks reads webhooks from the file at path (see ParseWebhooks), with secrets from the
// environment or from files.
func LoadWebhooks(path string) ([]Webhook, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	defer f.Close()
	return ParseWebhooks(f, path, os.Getenv, os.ReadFile)
}

// ParseWebhooks reads webhooks, one per line, "#" comments:
//
//	NAME URL [events=TYPE,TYPE…] [format=json|slack] [secret=env:VAR|secret=file:PATH]
//
// A secret is never written in the file itself: it comes from an environment variable or a
// file (e.g. a mounted Kubernetes secret). A malformed line is an error naming the line (never
// the secret).
func ParseWebhooks(r io.Reader, name string, getenv func(string) string, readFile func(string) ([]byte, error)) ([]Webhook, error) {
	var out []Webhook
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w, err := parseWebhook(strings.Fields(line), getenv, readFile)
		if err != nil {
			return nil, fmt.Errorf("webhooks %s line %d: %w", name, n, err)
		}
		out = append(out, w)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("webhooks %s: %w", name, err)
	}
	return out, nil
}

func parseWebhook(f []string, getenv func(string) string, readFile func(string) ([]byte, error)) (Webhook, error) {
	if len(f) < 2 {
		return Webhook{}, fmt.Errorf(`want "NAME URL [events=…] [format=json|slack] [secret=env:VAR|file:PATH]"`)
	}
	w := Webhook{Name: f[0], URL: f[1]}
	for _, opt := range f[2:] {
		key, value, ok := strings.Cut(opt, "=")
		if !ok || value == "" {
			return Webhook{}, fmt.Errorf("option %q: want key=value", opt)
		}
		switch key {
		case "events":
			w.Events = strings.Split(value, ",")
		case "format":
			w.Format = value
		case "secret":
			src, ref, _ := strings.Cut(value, ":")
			switch src {
			case "env":
				if w.Secret = getenv(ref); w.Secret == "" {
					return Webhook{}, fmt.Errorf("secret: the environment variable %s is empty or unset", ref)
				}
			case "file":
				b, err := readFile(ref)
				if err != nil {
					return Webhook{}, fmt.Errorf("secret: %w", err)
				}
				if w.Secret = strings.TrimSpace(string(b)); w.Secret == "" {
					return Webhook{}, fmt.Errorf("secret: the file %s is empty", ref)
				}
			default:
				return Webhook{}, fmt.Errorf("secret: want env:VAR or file:PATH (a secret is never written in this file)")
			}
		default:
			return Webhook{}, fmt.Errorf("unknown option %q (want events, format or secret)", key)
		}
	}
	return w, nil
}
