package crawl

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/temoto/robotstxt"
)

// robots.txt interpretation (RFC 9309 and Google's practice):
//   - 2xx: the body is parsed; a malformed file is parsed leniently (lines
//     the parser rejects are dropped and the rest is used); bodies beyond
//     500 KiB are truncated, as Google does;
//   - 3xx (a redirect the caller did not follow) and 4xx: allow everything;
//   - 5xx, 0 or anything else: ErrRobotsUnavailable — the caller waits and
//     retries instead of crawling.

// ErrRobotsUnavailable means robots.txt could not be obtained (5xx or
// unreachable): the host must not be crawled until it can.
var ErrRobotsUnavailable = errors.New("robots.txt unavailable")

const maxRobotsBytes = 500 << 10

// Robots is the parsed policy of one host for one user agent.
type Robots struct {
	group    *robotstxt.Group // nil = allow all
	sitemaps []string
}

// ParseRobots interprets a robots.txt response for userAgent.
func ParseRobots(status int, body []byte, userAgent string) (*Robots, error) {
	switch {
	case status >= 200 && status < 300:
	case status >= 300 && status < 500:
		return &Robots{}, nil
	default:
		return nil, fmt.Errorf("robots.txt status %d: %w", status, ErrRobotsUnavailable)
	}
	if len(body) > maxRobotsBytes {
		body = body[:maxRobotsBytes]
		if i := bytes.LastIndexByte(body, '\n'); i > 0 {
			body = body[:i+1]
		}
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	data, err := robotstxt.FromBytes(body)
	if err != nil {
		data, err = robotstxt.FromBytes(lenientRobots(body))
		if err != nil {
			// Nothing usable survives: behave as if there were no file.
			return &Robots{}, nil
		}
	}
	agent := strings.ToLower(strings.TrimSpace(userAgent))
	if i := strings.IndexAny(agent, "/ "); i > 0 {
		agent = agent[:i]
	}
	if agent == "" {
		agent = "sou"
	}
	r := &Robots{group: data.FindGroup(agent)}
	for _, s := range data.Sitemaps {
		if u, err := NormalizeURL(s, nil); err == nil {
			r.sitemaps = append(r.sitemaps, u.String())
		}
	}
	return r, nil
}

// lenientRobots drops the lines temoto/robotstxt rejects: rules before any
// User-agent line and Crawl-delay values that are not numbers.
func lenientRobots(body []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(body))
	seenAgent := false
	for _, line := range bytes.Split(body, []byte("\n")) {
		content := line
		if i := bytes.IndexByte(content, '#'); i >= 0 {
			content = content[:i]
		}
		key, val, ok := bytes.Cut(content, []byte(":"))
		if !ok {
			continue
		}
		k := strings.ToLower(strings.TrimSpace(string(key)))
		v := strings.TrimSpace(string(val))
		switch k {
		case "user-agent", "useragent", "user agent":
			seenAgent = true
		case "allow", "disallow":
			if !seenAgent {
				continue
			}
		case "crawl-delay", "crawldelay":
			if !seenAgent {
				continue
			}
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		case "sitemap", "host":
		default:
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// Allowed reports whether u may be fetched.
func (r *Robots) Allowed(u *url.URL) bool {
	if r == nil || r.group == nil || u == nil {
		return true
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if path == "/robots.txt" {
		return true
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	return r.group.Test(path)
}

// CrawlDelay is the Crawl-delay of our group, 0 if none. The caller caps it.
func (r *Robots) CrawlDelay() time.Duration {
	if r == nil || r.group == nil || r.group.CrawlDelay < 0 {
		return 0
	}
	return r.group.CrawlDelay
}

// Sitemaps lists the normalised Sitemap URLs of the file.
func (r *Robots) Sitemaps() []string {
	if r == nil {
		return nil
	}
	return r.sitemaps
}
