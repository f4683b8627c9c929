package p2p

import (
	"fmt"
	"net/url"
	"strings"
)

// hostOf extracts the ownership host (lowercased host[:port]) from an
// absolute URL. Default ports are kept as written: crawl normalises URLs
// before they reach p2p, so the same host is always spelled the same way.
func hostOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse url %.100q: %w", raw, err)
	}
	if u.Host == "" {
		return "", fmt.Errorf("url %.100q has no host", raw)
	}
	return strings.ToLower(u.Host), nil
}
