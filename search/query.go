package search

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"sou/index"
)

// Query limits: beyond them ParseQuery returns an error rather than a
// surprising partial reading.
const (
	MaxQueryRunes = 1000
	MaxQueryBytes = 4096
	MaxQueryTerms = 32
)

var (
	// ErrEmptyQuery: nothing to search for (blank, only punctuation, or only
	// operators such as -word, OR, site:).
	ErrEmptyQuery = errors.New("search: query has no search terms")
	// ErrQueryTooLong: more than MaxQueryRunes characters.
	ErrQueryTooLong = fmt.Errorf("search: query longer than %d characters", MaxQueryRunes)
	// ErrTooManyTerms: more than MaxQueryTerms terms after analysis.
	ErrTooManyTerms = fmt.Errorf("search: query has more than %d terms", MaxQueryTerms)
)

// Clause is a conjunction of terms; with Phrase set the terms must also
// occur at the relative positions Pos (a quoted phrase).
type Clause struct {
	Terms  []string
	Pos    []int `json:",omitempty"`
	Phrase bool  `json:",omitempty"`
}

// Group is a disjunction: a document matches if any clause matches.
type Group struct {
	Clauses []Clause
}

// Query is a parsed query: every group must match (AND), no Exclude clause
// may match, and when Sites is non-empty the host must be one of them or a
// subdomain; no host may match ExcludeSites.
type Query struct {
	raw          string
	script       index.Script // of the query's text (Params.SameScript)
	Groups       []Group
	Exclude      []Clause `json:",omitempty"`
	Sites        []string `json:",omitempty"`
	ExcludeSites []string `json:",omitempty"`
}

// Raw returns the query text as typed (after replacing invalid UTF-8 and
// control characters by spaces); re-parsing it yields the same Query.
func (q *Query) Raw() string { return q.raw }

// Terms returns the distinct positive terms in query order: the terms that
// score, that statistics are gathered for, and that snippets highlight.
func (q *Query) Terms() []string {
	var out []string
	seen := map[string]bool{}
	for _, g := range q.Groups {
		for _, c := range g.Clauses {
			for _, t := range c.Terms {
				if !seen[t] {
					seen[t] = true
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// Relaxable reports whether documents lacking some of q's terms may
// match it (Params.Relax): q has at least two terms, and every group is a
// single clause that is not a phrase. A quoted phrase or an OR says the
// user chose the words; a word that the analyzer split (Chinese written
// without spaces) is relaxed term by term like words typed apart.
func (q *Query) Relaxable() bool {
	for _, g := range q.Groups {
		if len(g.Clauses) != 1 || g.Clauses[0].Phrase {
			return false
		}
	}
	return len(q.Terms()) >= 2
}

// String is a canonical form of the query (equal queries print equally),
// usable as a cache key.
func (q *Query) String() string {
	var b strings.Builder
	clause := func(c Clause) {
		if c.Phrase {
			b.WriteByte('"')
			for i, t := range c.Terms {
				if i > 0 {
					fmt.Fprintf(&b, " %d:", c.Pos[i]-c.Pos[0])
				}
				b.WriteString(t)
			}
			b.WriteByte('"')
			return
		}
		b.WriteString(strings.Join(c.Terms, "+"))
	}
	for i, g := range q.Groups {
		if i > 0 {
			b.WriteByte(' ')
		}
		for j, c := range g.Clauses {
			if j > 0 {
				b.WriteString(" OR ")
			}
			clause(c)
		}
	}
	for _, c := range q.Exclude {
		b.WriteString(" -")
		clause(c)
	}
	for _, s := range q.Sites {
		b.WriteString(" site:" + s)
	}
	for _, s := range q.ExcludeSites {
		b.WriteString(" -site:" + s)
	}
	return b.String()
}

// MatchHost reports whether host passes the site: filters.
func (q *Query) MatchHost(host string) bool {
	for _, s := range q.ExcludeSites {
		if hostUnder(host, s) {
			return false
		}
	}
	if len(q.Sites) == 0 {
		return true
	}
	for _, s := range q.Sites {
		if hostUnder(host, s) {
			return true
		}
	}
	return false
}

// hostUnder: host (host[:port]) is site or a subdomain of it; a site
// without a port matches any port.
func hostUnder(host, site string) bool {
	if !strings.Contains(site, ":") {
		if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
			host = host[:i]
		}
	}
	return host == site || strings.HasSuffix(host, "."+site)
}

type lexKind int

const (
	lexWord lexKind = iota
	lexPhrase
	lexOr
	lexSite
)

type lexeme struct {
	kind lexKind
	text string
	neg  bool
}

// lex splits a query into words, "phrases" (an unbalanced quote runs to the
// end), OR (or |), site:host, each optionally negated by a leading '-'.
func lex(q string) []lexeme {
	var out []lexeme
	i := 0
	for i < len(q) {
		r, sz := utf8.DecodeRuneInString(q[i:])
		if unicode.IsSpace(r) {
			i += sz
			continue
		}
		neg := false
		if r == '-' && i+1 < len(q) {
			if r2, _ := utf8.DecodeRuneInString(q[i+1:]); !unicode.IsSpace(r2) && r2 != '-' {
				neg = true
				i++
				r, sz = utf8.DecodeRuneInString(q[i:])
			}
		}
		if r == '"' || r == '“' || r == '”' || r == '「' {
			i += sz
			end := len(q)
			next := len(q)
			for j := i; j < len(q); {
				r2, sz2 := utf8.DecodeRuneInString(q[j:])
				if r2 == '"' || r2 == '”' || r2 == '“' || r2 == '」' {
					end, next = j, j+sz2
					break
				}
				j += sz2
			}
			out = append(out, lexeme{kind: lexPhrase, text: q[i:end], neg: neg})
			i = next
			continue
		}
		j := i
		for j < len(q) {
			r2, sz2 := utf8.DecodeRuneInString(q[j:])
			if unicode.IsSpace(r2) || r2 == '"' || r2 == '“' || r2 == '「' {
				break
			}
			j += sz2
		}
		w := q[i:j]
		i = j
		switch {
		case !neg && (w == "OR" || w == "|" || w == "||"):
			out = append(out, lexeme{kind: lexOr})
		case len(w) > 5 && strings.EqualFold(w[:5], "site:"):
			out = append(out, lexeme{kind: lexSite, text: w[5:], neg: neg})
		default:
			out = append(out, lexeme{kind: lexWord, text: w, neg: neg})
		}
	}
	return out
}

// cleanSite turns "https://Example.com/path" into "example.com".
func cleanSite(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	return strings.Trim(s, ".")
}

// sanitize replaces invalid UTF-8 and control characters with spaces.
func sanitize(q string) string {
	q = strings.ToValidUTF8(q, " ")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\uFFFD' {
			return ' '
		}
		return r
	}, q)
}

// ParseQuery parses q: terms are ANDed; "a phrase"; -word, -"phrase" and
// -site:host exclude; a OR b (also a | b) makes alternatives; site:host
// restricts to a host and its subdomains (several site: are alternatives).
// A word that the analyzer splits (Chinese written without spaces) becomes
// one clause requiring all its terms.
// Malformed input is read sensibly: invalid UTF-8 and control characters
// count as spaces, an unbalanced quote runs to the end, dangling ORs are
// ignored. It never panics.
func ParseQuery(q string, a *index.Analyzer) (*Query, error) {
	if a == nil {
		return nil, errors.New("search: ParseQuery needs an analyzer")
	}
	if len(q) > MaxQueryBytes || utf8.RuneCountInString(q) > MaxQueryRunes {
		return nil, ErrQueryTooLong
	}
	q = sanitize(q)
	query := &Query{raw: q, script: a.Script(q)}
	nterms := 0
	toClause := func(text string, phrase bool) (Clause, bool) {
		toks := a.AnalyzeQuery(text)
		var c Clause
		seen := map[string]bool{}
		for _, t := range toks {
			if phrase {
				c.Terms = append(c.Terms, t.Term)
				c.Pos = append(c.Pos, t.Pos)
				continue
			}
			if !seen[t.Term] {
				seen[t.Term] = true
				c.Terms = append(c.Terms, t.Term)
			}
		}
		if len(c.Terms) == 0 {
			return c, false
		}
		if phrase && len(c.Terms) > 1 {
			c.Phrase = true
			base := c.Pos[0]
			for i := range c.Pos {
				c.Pos[i] -= base
			}
		} else {
			c.Pos = nil
		}
		nterms += len(c.Terms)
		return c, true
	}
	pendingOr := false
	for _, lx := range lex(q) {
		switch lx.kind {
		case lexOr:
			if len(query.Groups) > 0 {
				pendingOr = true
			}
			continue
		case lexSite:
			s := cleanSite(lx.text)
			if s == "" {
				continue
			}
			if lx.neg {
				query.ExcludeSites = append(query.ExcludeSites, s)
			} else {
				query.Sites = append(query.Sites, s)
			}
		case lexWord, lexPhrase:
			c, ok := toClause(lx.text, lx.kind == lexPhrase)
			if !ok {
				continue
			}
			if lx.neg {
				query.Exclude = append(query.Exclude, c)
				continue
			}
			if pendingOr {
				g := &query.Groups[len(query.Groups)-1]
				g.Clauses = append(g.Clauses, c)
			} else if !hasClause(query.Groups, c) {
				query.Groups = append(query.Groups, Group{Clauses: []Clause{c}})
			} else {
				nterms -= len(c.Terms) // "a a" means "a"
			}
		}
		pendingOr = false
	}
	if nterms > MaxQueryTerms {
		return nil, ErrTooManyTerms
	}
	if len(query.Groups) == 0 {
		return nil, ErrEmptyQuery
	}
	return query, nil
}

// hasClause reports whether groups already require exactly c.
func hasClause(groups []Group, c Clause) bool {
	for _, g := range groups {
		if len(g.Clauses) == 1 && g.Clauses[0].Phrase == c.Phrase &&
			slices.Equal(g.Clauses[0].Terms, c.Terms) && slices.Equal(g.Clauses[0].Pos, c.Pos) {
			return true
		}
	}
	return false
}
