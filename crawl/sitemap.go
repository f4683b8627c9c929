package crawl

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html/charset"
)

// Sitemaps: XML urlset and sitemapindex (namespaces ignored, parsed
// leniently), RSS 2.0 <item><link> and Atom <entry><link href>, plain text
// (one URL per line), each optionally gzip-compressed (detected by magic
// bytes, not by name or header). Caps: maxSitemapBytes of decoded input and
// maxSitemapEntries URLs plus sitemaps; input past the caps is ignored (not an
// error), as the sitemaps protocol itself limits files to 50,000 URLs.
// Relative and invalid URLs are resolved against base or dropped.

const (
	maxSitemapBytes   = 10 << 20
	maxSitemapEntries = 50_000
)

// ParseSitemap reads a sitemap or sitemap index. It returns the page URLs and
// the child sitemap URLs, normalised and de-duplicated. An error (wrapping
// ErrParse or ErrBadEncoding) is returned only when nothing could be read.
func ParseSitemap(body []byte, base *url.URL) (urls []string, sitemaps []string, err error) {
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, nil, fmt.Errorf("sitemap gzip: %v: %w", err, ErrBadEncoding)
		}
		decoded, rerr := io.ReadAll(io.LimitReader(zr, maxSitemapBytes))
		if rerr != nil && len(decoded) == 0 {
			return nil, nil, fmt.Errorf("sitemap gzip: %v: %w", rerr, ErrBadEncoding)
		}
		body = decoded
	}
	if len(body) > maxSitemapBytes {
		body = body[:maxSitemapBytes]
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	c := &sitemapCollector{base: base, seen: make(map[string]struct{})}
	if len(trimmed) > 0 && trimmed[0] == '<' {
		err = c.parseXML(trimmed)
	} else {
		c.parseText(trimmed)
	}
	if len(c.urls)+len(c.sitemaps) == 0 && err != nil {
		return nil, nil, err
	}
	return c.urls, c.sitemaps, nil
}

type sitemapCollector struct {
	base     *url.URL
	seen     map[string]struct{}
	urls     []string
	sitemaps []string
}

func (c *sitemapCollector) full() bool { return len(c.urls)+len(c.sitemaps) >= maxSitemapEntries }

func (c *sitemapCollector) add(raw string, isSitemap bool) {
	if c.full() {
		return
	}
	u, err := NormalizeURL(strings.TrimSpace(raw), c.base)
	if err != nil {
		return
	}
	s := u.String()
	if _, dup := c.seen[s]; dup {
		return
	}
	c.seen[s] = struct{}{}
	if isSitemap {
		c.sitemaps = append(c.sitemaps, s)
	} else {
		c.urls = append(c.urls, s)
	}
}

func (c *sitemapCollector) parseText(body []byte) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), maxRawURLLength)
	for sc.Scan() && !c.full() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "http://") || strings.HasPrefix(line, "https://") {
			c.add(line, false)
		}
	}
}

func (c *sitemapCollector) parseXML(body []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.Strict = false
	dec.Entity = xml.HTMLEntity
	dec.CharsetReader = charset.NewReaderLabel
	var stack []string
	var text strings.Builder
	collecting := false
	for !c.full() {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("sitemap xml: %v: %w", err, ErrParse)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			if len(stack) < 64 {
				stack = append(stack, name)
			}
			parent := ""
			if len(stack) >= 2 {
				parent = stack[len(stack)-2]
			}
			switch {
			case name == "loc" || (name == "link" && parent == "item"):
				collecting = true
				text.Reset()
			case name == "link" && parent == "entry":
				rel := ""
				href := ""
				for _, a := range t.Attr {
					switch strings.ToLower(a.Name.Local) {
					case "href":
						href = a.Value
					case "rel":
						rel = a.Value
					}
				}
				if href != "" && (rel == "" || rel == "alternate") {
					c.add(href, false)
				}
			}
		case xml.CharData:
			if collecting && text.Len() < maxRawURLLength {
				text.Write(t)
			}
		case xml.EndElement:
			if collecting {
				collecting = false
				parent := ""
				if len(stack) >= 2 {
					parent = stack[len(stack)-2]
				}
				c.add(text.String(), parent == "sitemap")
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	return nil
}
