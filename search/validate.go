package search

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"unicode"

	"sou/index"
)

// Plausibility limits on a shard's answer. A shard is a peer, and a peer
// may lie: the coordinator recomputes every score from the raw statistics,
// so what it must refuse is statistics that cannot be true. They are loose
// enough that no honest shard comes near them.
const (
	// maxShardDocs bounds a shard's document count (10^12).
	maxShardDocs = 1_000_000_000_000
	// maxFieldTokens bounds one field of one document: the index analyzes
	// at most index.MaxAnalyzeBytes per field, and a token is at least one
	// byte; anchor text accumulates, hence the margin.
	maxFieldTokens = 16 * index.MaxAnalyzeBytes
	// maxCandidateURLBytes, maxTitleBytes and maxSnippetBytes bound the
	// strings a candidate carries into a result page. What the strings say
	// is not checked here: the coordinator reads a snippet as plain text
	// (plainSnippet) and the pages escape titles and snippets.
	maxCandidateURLBytes = 8 << 10
	maxTitleBytes        = 4 << 10
	maxSnippetBytes      = 8 << 10
)

// errImplausible marks a shard answer whose statistics cannot be true; the
// whole answer is refused (never merged) and reported as failed.
var errImplausible = errors.New("implausible shard answer")

func implausible(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errImplausible, fmt.Sprintf(format, args...))
}

// validateShardResult checks that an answer to a request for k candidates
// over the query's terms could have come from a real index. It checks
// statistics, not content: a shard can still describe plausible pages
// untruthfully (see the package doc).
func validateShardResult(r *ShardResult, q *Query, k int) error {
	st := &r.Stats
	if st.Docs < 0 || st.Docs > maxShardDocs {
		return implausible("document count %d", st.Docs)
	}
	// An honest shard reads its document counts and its postings from two
	// snapshots a moment apart, so deletions in between may leave a df or a
	// total a little above the count; slack allows for that, not for more.
	slack := 16 + st.Docs/16
	if r.Total < 0 || r.Total > st.Docs+slack {
		return implausible("total %d with %d documents", r.Total, st.Docs)
	}
	for f, sum := range st.FieldLenSum {
		if sum < 0 || sum > st.Docs*maxFieldTokens {
			return implausible("field %d length sum %d for %d documents", f, sum, st.Docs)
		}
	}
	terms := map[string]bool{}
	for _, t := range q.Terms() {
		terms[t] = true
	}
	if len(st.DF) > len(terms) {
		return implausible("document frequencies for %d terms, the query has %d", len(st.DF), len(terms))
	}
	for t, df := range st.DF {
		if !terms[t] {
			return implausible("document frequency for %.40q, not a query term", t)
		}
		if df < 0 || df > st.Docs+slack {
			return implausible("df %d for %.40q with %d documents", df, t, st.Docs)
		}
	}
	if len(r.Candidates) > k {
		return implausible("%d candidates, %d asked", len(r.Candidates), k)
	}
	if int64(len(r.Candidates)) > st.Docs+slack {
		return implausible("%d candidates from %d documents", len(r.Candidates), st.Docs)
	}
	withTerm := map[string]int64{}
	urls := make(map[string]bool, len(r.Candidates))
	order := q.Terms()
	for i := range r.Candidates {
		c := &r.Candidates[i]
		if err := validateCandidate(c, terms); err != nil {
			return err
		}
		if err := validateProx(c, order); err != nil {
			return err
		}
		if urls[c.URL] {
			return implausible("URL %.100q listed twice", c.URL)
		}
		urls[c.URL] = true
		for t := range c.TF {
			withTerm[t]++
		}
	}
	// A candidate that contains a term is one of the documents counted in
	// that term's df.
	for t, n := range withTerm {
		if n > st.DF[t] {
			return implausible("%d candidates contain %.40q, df %d", n, t, st.DF[t])
		}
	}
	return nil
}

func validateCandidate(c *Candidate, terms map[string]bool) error {
	switch {
	case c.URL == "" || len(c.URL) > maxCandidateURLBytes:
		return implausible("URL of %d bytes", len(c.URL))
	case !webURL(c.URL):
		// The crawler stores only normalised http(s) URLs; anything else
		// (javascript:, a URL with spaces or control characters) would
		// become a link on the result page.
		return implausible("URL %.100q is not a normalised http(s) URL", c.URL)
	case len(c.Title) > maxTitleBytes:
		return implausible("title too long for %.100q", c.URL)
	case c.Snippet != "":
		// Snippets come in the second round, for the results shown only.
		return implausible("a snippet, not asked for, with %.100q", c.URL)
	case math.IsNaN(c.StaticRank) || math.IsInf(c.StaticRank, 0) || c.StaticRank < 0:
		return implausible("static rank %v for %.100q", c.StaticRank, c.URL)
	case c.Script > index.ScriptTraditional:
		return implausible("script %d for %.100q", c.Script, c.URL)
	}
	if h := candidateHost(c.URL); h == "" || !strings.EqualFold(h, c.Host) {
		return implausible("host %.100q does not match URL %.100q", c.Host, c.URL)
	}
	for f, l := range c.FieldLen {
		if int64(l) > maxFieldTokens {
			return implausible("field %d length %d of %.100q", f, l, c.URL)
		}
	}
	if len(c.TF) > len(terms) {
		return implausible("%d term frequencies for %d query terms", len(c.TF), len(terms))
	}
	for t, tf := range c.TF {
		if !terms[t] {
			return implausible("term frequency for %.40q, not a query term", t)
		}
		for f := range tf {
			if tf[f] > c.FieldLen[f] {
				return implausible("tf %d of %.40q in field %d longer than the field (%d) of %.100q", tf[f], t, f, c.FieldLen[f], c.URL)
			}
		}
	}
	return nil
}

// validateProx checks a candidate's proximity counts: one per pair of
// neighbouring query terms, each at most the occurrences of either term
// of its pair (proxCount never counts more).
func validateProx(c *Candidate, terms []string) error {
	if len(c.Prox) == 0 {
		return nil
	}
	if len(c.Prox) != len(terms)-1 {
		return implausible("%d proximity counts for %d query terms of %.100q", len(c.Prox), len(terms), c.URL)
	}
	for i, x := range c.Prox {
		a, b := c.TF[terms[i]], c.TF[terms[i+1]]
		if x > min(tfSum(&a), tfSum(&b)) {
			return implausible("proximity count %d of %.40q and %.40q above their occurrences in %.100q", x, terms[i], terms[i+1], c.URL)
		}
	}
	return nil
}

// webURL reports whether raw is an absolute http or https URL without
// spaces or control characters.
func webURL(raw string) bool {
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsControl(r) }) {
		return false
	}
	scheme, _, ok := strings.Cut(raw, "://")
	return ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https"))
}

// candidateHost is a URL's host as the crawler keys it (crawl.HostKey,
// which search may not import): lowercased, the port kept only when it is
// not the scheme's default, no trailing dot.
func candidateHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	host := strings.ToLower(u.Host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		port, scheme := host[i+1:], strings.ToLower(u.Scheme)
		if port == "" || (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
			host = host[:i]
		}
	}
	return strings.TrimSuffix(host, ".")
}
