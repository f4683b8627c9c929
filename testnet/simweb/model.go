package simweb

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Misbehaviour classes. Each is switched on for some synthetic hosts (never
// for portals); Config.Misbehave selects which ones exist at all.
const (
	ClassRobotsRules     = "robots-rules"       // Disallow/Allow/Crawl-delay, a "sou" group that overrides "*"
	ClassRobotsMissing   = "robots-missing"     // robots.txt answers 404
	ClassRobots5xx       = "robots-5xx"         // robots.txt answers 503 twice, then the robots-rules file
	ClassRobotsMalformed = "robots-malformed"   // BOM, HTML junk, odd case, bad values; one valid Disallow
	ClassSitemap         = "sitemap"            // robots.txt names /sitemap.xml
	ClassSitemapIndexGz  = "sitemap-index-gz"   // robots.txt names a gzipped sitemap index of gzipped sitemaps
	ClassCharsetLegacy   = "charset-legacy"     // GBK, GB18030, Big5, Shift_JIS or Latin-1, declared correctly
	ClassCharsetNone     = "charset-undeclared" // legacy or UTF-8 bytes with no declaration at all
	ClassCharsetWrong    = "charset-wrong"      // the header or meta names the wrong charset
	ClassRedirects       = "redirects"          // 301/302/307/308 links, also cross-host
	ClassRedirectLoop    = "redirect-loop"      // /loop/a -> /loop/b -> /loop/a
	ClassErrors          = "errors"             // 404, 410, 500 links, NXDOMAIN links; some pages 503 once
	ClassRateLimit       = "rate-limit"         // 429 + Retry-After: 1 on the first request of a third of pages
	ClassSlow            = "slow"               // per-host latency (tens of ms) and bandwidth cap
	ClassBlackhole       = "blackhole"          // accepts connections, never answers (no page required)
	ClassDrip            = "drip"               // answers a few bytes at a time, forever slow (no page required)
	ClassTrap            = "trap"               // infinite calendar under /calendar/
	ClassMirror          = "mirror"             // this host is a full mirror of another host
	ClassNearDup         = "near-dup"           // /print/ variants that differ by one line
	ClassHuge            = "huge"               // /big/archive.html, 11 MB of HTML
	ClassGzipBomb        = "gzip-bomb"          // /bomb/data.html: ~110 KB gzip that inflates past 100 MB
	ClassMalformedHTML   = "malformed-html"     // unclosed tags, unquoted attributes, links in comments/scripts
	ClassNonHTML         = "non-html"           // PDF, PNG and text/plain pages
	ClassMetaRobots      = "meta-robots"        // meta noindex / nofollow, rel=nofollow links
	ClassCanonical       = "canonical"          // <link rel=canonical>, ?ref= variants linked
	ClassURLVariants     = "url-variants"       // mixed-case hosts, :80, reordered queries, session ids, <base href>
)

// AllClasses lists every misbehaviour class in a stable order.
var AllClasses = []string{
	ClassRobotsRules, ClassRobotsMissing, ClassRobots5xx, ClassRobotsMalformed,
	ClassSitemap, ClassSitemapIndexGz,
	ClassCharsetLegacy, ClassCharsetNone, ClassCharsetWrong,
	ClassRedirects, ClassRedirectLoop, ClassErrors, ClassRateLimit,
	ClassSlow, ClassBlackhole, ClassDrip, ClassTrap, ClassMirror, ClassNearDup,
	ClassHuge, ClassGzipBomb, ClassMalformedHTML, ClassNonHTML, ClassMetaRobots,
	ClassCanonical, ClassURLVariants,
}

// classShare is the share of non-portal hosts that get each class (at least
// one host each when there are enough hosts).
var classShare = map[string]float64{
	ClassRobotsRules: 0.25, ClassRobotsMissing: 0.05, ClassRobots5xx: 0.04, ClassRobotsMalformed: 0.04,
	ClassSitemap: 0.15, ClassSitemapIndexGz: 0.05,
	ClassCharsetLegacy: 0.25, ClassCharsetNone: 0.05, ClassCharsetWrong: 0.04,
	ClassRedirects: 0.1, ClassRedirectLoop: 0.03, ClassErrors: 0.15, ClassRateLimit: 0.05,
	ClassSlow: 0.1, ClassBlackhole: 0.01, ClassDrip: 0.01, ClassTrap: 0.03, ClassMirror: 0.03,
	ClassNearDup: 0.1, ClassHuge: 0.01, ClassGzipBomb: 0.01, ClassMalformedHTML: 0.1,
	ClassNonHTML: 0.1, ClassMetaRobots: 0.15, ClassCanonical: 0.1, ClassURLVariants: 0.2,
}

// exclusiveClasses own their host alone.
var exclusiveClasses = []string{ClassBlackhole, ClassDrip, ClassMirror}

// robotsClasses are mutually exclusive with each other.
var robotsClasses = []string{ClassRobotsRules, ClassRobotsMissing, ClassRobots5xx, ClassRobotsMalformed}

// charsetClasses are mutually exclusive with each other.
var charsetClasses = []string{ClassCharsetLegacy, ClassCharsetNone, ClassCharsetWrong}

// ParseClasses turns a --misbehave list into a set. nil, empty or "all"
// means every class, "none" means none.
func ParseClasses(list []string) (map[string]bool, error) {
	set := map[string]bool{}
	if len(list) == 0 {
		for _, c := range AllClasses {
			set[c] = true
		}
		return set, nil
	}
	for _, raw := range list {
		c := strings.ToLower(strings.TrimSpace(raw))
		switch c {
		case "":
			continue
		case "all":
			for _, a := range AllClasses {
				set[a] = true
			}
		case "none":
		default:
			known := false
			for _, a := range AllClasses {
				if a == c {
					known = true
				}
			}
			if !known {
				return nil, fmt.Errorf("unknown misbehaviour class %q (known: all, none, %s)", raw, strings.Join(AllClasses, ", "))
			}
			set[c] = true
		}
	}
	return set, nil
}

var hostKinds = []string{"blog", "shop", "wiki", "forum", "docs", "edu", "travel", "news", "photo", "music"}

var kindSections = map[string][]string{
	"blog": {"posts", "archive", "notes"}, "shop": {"products", "category", "deals"},
	"wiki": {"wiki", "topics", "talk"}, "forum": {"threads", "boards"},
	"docs": {"guide", "api", "reference"}, "edu": {"courses", "research", "people"},
	"travel": {"places", "hotels", "guides"}, "news": {"world", "politics", "sport", "tech", "culture"},
	"photo": {"albums", "gallery"}, "music": {"artists", "albums", "tracks"}, "portal": {"links", "topics"},
}

var listCategories = []string{"books", "garden", "tools", "games", "toys", "audio"}

// site is one synthetic host. It is immutable after generation.
type site struct {
	idx       int
	name      string // lowercase, no port
	kind      string
	n         int // pages
	classes   map[string]bool
	charset   string // actual encoding of the bytes
	declHdr   string // charset named in Content-Type ("" = none)
	declMeta  string // charset named in <meta> ("" = none)
	lang      string // en, zh, mixed
	latency   time.Duration
	bandwidth int // bytes per second, 0 = unlimited
	ttl       uint32
	mirrorOf  *site // content and structure source of a mirror host
	portal    bool
	portalIdx int
	listed    []*site // hosts in this portal's directory
}

func (s *site) has(c string) bool { return s.classes[c] }

// src is the site whose structure and text this site serves.
func (s *site) src() *site {
	if s.mirrorOf != nil {
		return s.mirrorOf
	}
	return s
}

func (s *site) sortedClasses() []string {
	out := []string{}
	for _, c := range AllClasses {
		if s.classes[c] {
			out = append(out, c)
		}
	}
	return out
}

// synth is the synthetic half of the web.
type synth struct {
	seed    int64
	sites   []*site
	byName  map[string]*site
	portals []*site
}

func hash64(parts ...any) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		fmt.Fprint(h, p, "\x00")
	}
	return h.Sum64()
}

func rngFor(parts ...any) *rand.Rand {
	a := hash64(parts...)
	return rand.New(rand.NewPCG(a, a^0x9e3779b97f4a7c15))
}

// minPagesPerHost keeps every host big enough to carry its classes' pages.
const minPagesPerHost = 12

func newSynth(seed int64, hosts, pages int, enabled map[string]bool) *synth {
	sy := &synth{seed: seed, byName: map[string]*site{}}
	if hosts <= 0 {
		return sy
	}
	r := rngFor(seed, "hosts")
	nPortals := max(1, hosts/50)
	for i := 0; i < hosts; i++ {
		s := &site{idx: i, classes: map[string]bool{}}
		if i < nPortals {
			s.kind, s.portal, s.portalIdx = "portal", true, i
		} else {
			s.kind = hostKinds[i%len(hostKinds)]
		}
		s.name = fmt.Sprintf("%s-%d.sim.test", s.kind, i)
		s.ttl = uint32(30 + r.IntN(3571))
		sy.sites = append(sy.sites, s)
		sy.byName[s.name] = s
		if s.portal {
			sy.portals = append(sy.portals, s)
		}
	}
	// Skewed sizes: a Zipf-like weight on a random rank.
	perm := r.Perm(hosts)
	weights := make([]float64, hosts)
	var sum float64
	for i := range weights {
		weights[i] = 1 / math.Pow(float64(perm[i]+1), 0.9)
		sum += weights[i]
	}
	for i, s := range sy.sites {
		s.n = max(minPagesPerHost, int(math.Round(float64(pages)*weights[i]/sum)))
	}
	sy.assignClasses(r, enabled)
	for _, s := range sy.sites {
		sy.assignTraits(s)
	}
	// Directory listings: every non-portal host is listed by one portal.
	for _, s := range sy.sites {
		if !s.portal {
			p := sy.portals[s.idx%len(sy.portals)]
			p.listed = append(p.listed, s)
		}
	}
	return sy
}

func (sy *synth) assignClasses(r *rand.Rand, enabled map[string]bool) {
	var pool []*site
	for _, s := range sy.sites {
		if !s.portal {
			pool = append(pool, s)
		}
	}
	if len(pool) == 0 {
		return
	}
	r.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	count := func(c string, of int) int {
		return max(1, int(math.Round(classShare[c]*float64(of))))
	}
	// Exclusive classes take hosts from the end of the shuffled pool, as
	// long as at least half of the pool stays for the rest.
	end := len(pool)
	for _, c := range exclusiveClasses {
		if !enabled[c] {
			continue
		}
		for j := 0; j < count(c, len(pool)) && end > len(pool)/2+1; j++ {
			end--
			pool[end].classes[c] = true
		}
	}
	rest := pool[:end]
	// Mirrors copy a normal host: its classes, size and traits.
	for _, s := range pool[end:] {
		if s.has(ClassMirror) {
			s.mirrorOf = rest[r.IntN(len(rest))]
		}
	}
	// Mutually exclusive groups take consecutive slices of a shuffle.
	for _, group := range [][]string{robotsClasses, charsetClasses} {
		order := r.Perm(len(rest))
		at := 0
		for _, c := range group {
			if !enabled[c] {
				continue
			}
			for j := 0; j < count(c, len(rest)) && at < len(order); j++ {
				rest[order[at]].classes[c] = true
				at++
			}
		}
	}
	for _, c := range AllClasses {
		if !enabled[c] || contains(exclusiveClasses, c) || contains(robotsClasses, c) || contains(charsetClasses, c) {
			continue
		}
		for _, j := range r.Perm(len(rest))[:min(len(rest), count(c, len(rest)))] {
			rest[j].classes[c] = true
		}
	}
	for _, s := range pool[end:] {
		if m := s.mirrorOf; m != nil {
			s.n = m.n
			for c := range m.classes {
				s.classes[c] = true
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (sy *synth) assignTraits(s *site) {
	r := rngFor(sy.seed, "traits", s.src().name)
	s.charset, s.declHdr, s.declMeta = "utf-8", "utf-8", "utf-8"
	switch r.IntN(5) {
	case 0, 1:
		s.lang = "zh"
	case 2, 3:
		s.lang = "en"
	default:
		s.lang = "mixed"
	}
	switch {
	case s.has(ClassCharsetLegacy):
		cs := []string{"gbk", "gb18030", "big5", "shift_jis", "iso-8859-1"}[s.src().idx%5]
		s.charset = cs
		switch r.IntN(3) {
		case 0:
			s.declHdr, s.declMeta = cs, ""
		case 1:
			s.declHdr, s.declMeta = "", cs
		default:
			s.declHdr, s.declMeta = cs, cs
		}
	case s.has(ClassCharsetNone):
		s.charset = []string{"gbk", "utf-8", "big5"}[s.src().idx%3]
		s.declHdr, s.declMeta = "", ""
	case s.has(ClassCharsetWrong):
		if s.src().idx%2 == 0 {
			// The server's default charset overrides a correct meta tag.
			s.charset, s.declHdr, s.declMeta = "utf-8", "iso-8859-1", "utf-8"
		} else {
			// A template claims UTF-8, the bytes are GBK.
			s.charset, s.declHdr, s.declMeta = "gbk", "", "utf-8"
		}
	}
	switch s.charset {
	case "iso-8859-1":
		s.lang = "en"
	case "gbk", "gb18030", "big5", "shift_jis":
		s.lang = "zh"
	}
	if s.has(ClassCharsetWrong) {
		s.lang = "zh"
	}
	if s.has(ClassSlow) {
		// Keep a sequential crawl of the host under maxHostSeconds.
		lat := time.Duration(10+r.IntN(40)) * time.Millisecond
		s.latency = min(lat, maxHostSeconds*time.Second/time.Duration(max(1, s.n)))
		s.bandwidth = (256 + r.IntN(768)) * 1024
	}
}

// Paths.

func (s *site) section(k int) string {
	src := s.src()
	secs := kindSections[src.kind]
	sec := secs[int(hash64("sec", src.name, k)%uint64(len(secs)))]
	switch {
	case src.has(ClassRobotsRules) || src.has(ClassRobots5xx):
		switch k % 10 {
		case 3:
			return "members/" + sec
		case 4:
			return "members/public"
		case 5:
			return "private"
		}
	case src.has(ClassRobotsMalformed):
		switch k % 10 {
		case 3:
			return "secret"
		case 4:
			return "Secret"
		case 5:
			return "secretive"
		}
	}
	if src.kind == "news" || src.kind == "blog" {
		return sec + "/" + strconv.Itoa(2015+k%10)
	}
	return sec
}

// pagePath is the normalised path (and sorted query) of page k.
func (s *site) pagePath(k int) string {
	if k == 0 {
		return "/"
	}
	src := s.src()
	if src.has(ClassNonHTML) && k%17 == 5 {
		return fmt.Sprintf("/notes/note-%d.txt", k)
	}
	if src.has(ClassURLVariants) && k%13 == 7 {
		return fmt.Sprintf("/list?cat=%s&page=%d", listCategories[k%len(listCategories)], k)
	}
	slug := []string{"item", "story", "page", "entry"}[k%4]
	return fmt.Sprintf("/%s/%s-%d.html", s.section(k), slug, k)
}

func (s *site) isPlain(k int) bool { return strings.HasSuffix(s.pagePath(k), ".txt") }

// routeKind says what the server does with a request.
type routeKind int

const (
	rNotFound routeKind = iota
	rPage
	rRobots
	rSitemap
	rSitemapIndex
	rSitemapPart
	rDir
	rOldRedirect
	rGoRedirect
	rLoop
	rMissing
	rGone
	rBroken
	rCalendar
	rPrint
	rPDF
	rPNG
	rHuge
	rBomb
)

type route struct {
	kind     routeKind
	k        int    // page number or part number
	ref      string // ?ref= value of a canonical variant
	status   int
	location string // absolute redirect target
	cal      [2]int // year, month
}

// trailingNum parses the decimal number between prefix and suffix (no
// leading zeros, so that one page has one path).
func trailingNum(s, prefix, suffix string) (int, bool) {
	if !strings.HasPrefix(s, prefix) || !strings.HasSuffix(s, suffix) {
		return 0, false
	}
	v := s[len(prefix) : len(s)-len(suffix)]
	if v == "" || (len(v) > 1 && v[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// redirectCode picks the status of an /old/ redirect.
func redirectCode(k int) int { return []int{301, 302, 307, 308}[k%4] }

// route maps a request on site s to what the server does. urlOf builds the
// absolute URLs of redirect targets.
func (sy *synth) route(s *site, rawPath, rawQuery string, urlOf func(*site, string) string) route {
	q, _ := url.ParseQuery(rawQuery)
	for k := range q {
		if isSessionParam(k) {
			delete(q, k)
		}
	}
	p := rawPath
	switch {
	case p == "/robots.txt":
		return route{kind: rRobots}
	case p == "/sitemap.xml" && s.has(ClassSitemap):
		return route{kind: rSitemap}
	case p == "/sitemap_index.xml.gz" && s.has(ClassSitemapIndexGz):
		return route{kind: rSitemapIndex}
	}
	if n, ok := trailingNum(p, "/sitemaps/part-", ".xml.gz"); ok && s.has(ClassSitemapIndexGz) {
		return route{kind: rSitemapPart, k: n}
	}
	if s.portal {
		if n, ok := trailingNum(p, "/dir/", ".html"); ok && n < portalDirPages(s) {
			return route{kind: rDir, k: n}
		}
	}
	if p == "/" || p == "" {
		return route{kind: rPage, k: 0, ref: q.Get("ref")}
	}
	if s.has(ClassRedirects) {
		if n, ok := trailingNum(p, "/old/", ""); ok && n < s.n {
			return route{kind: rOldRedirect, k: n, status: redirectCode(n), location: urlOf(s, s.pagePath(n))}
		}
		if rest, ok := strings.CutPrefix(p, "/go/"); ok {
			a, b, _ := strings.Cut(rest, "/")
			hi, err1 := strconv.Atoi(a)
			k, err2 := strconv.Atoi(b)
			if err1 == nil && err2 == nil && hi >= 0 && hi < len(sy.sites) && k >= 0 && k < sy.sites[hi].n &&
				strconv.Itoa(hi) == a && strconv.Itoa(k) == b {
				t := sy.sites[hi]
				return route{kind: rGoRedirect, status: []int{302, 307}[k%2], location: urlOf(t, t.pagePath(k))}
			}
		}
	}
	if s.has(ClassRedirectLoop) {
		switch p {
		case "/loop/a":
			return route{kind: rLoop, status: 302, location: urlOf(s, "/loop/b")}
		case "/loop/b":
			return route{kind: rLoop, status: 301, location: urlOf(s, "/loop/a")}
		}
	}
	if s.has(ClassErrors) {
		if _, ok := trailingNum(p, "/missing/", ".html"); ok {
			return route{kind: rMissing, status: 404}
		}
		if _, ok := trailingNum(p, "/gone/", ".html"); ok {
			return route{kind: rGone, status: 410}
		}
		if _, ok := trailingNum(p, "/broken/", ".html"); ok {
			return route{kind: rBroken, status: 500}
		}
	}
	if s.has(ClassTrap) && strings.HasPrefix(p, "/calendar/") {
		var y, m int
		if _, err := fmt.Sscanf(p, "/calendar/%d/%d/", &y, &m); err == nil && m >= 1 && m <= 12 &&
			p == fmt.Sprintf("/calendar/%d/%02d/", y, m) {
			return route{kind: rCalendar, cal: [2]int{y, m}}
		}
	}
	if s.has(ClassNearDup) {
		if n, ok := trailingNum(p, "/print/", ".html"); ok && n < s.n && hasPrint(n) {
			return route{kind: rPrint, k: n}
		}
	}
	if s.has(ClassNonHTML) {
		if n, ok := trailingNum(p, "/files/report-", ".pdf"); ok {
			return route{kind: rPDF, k: n}
		}
		if n, ok := trailingNum(p, "/img/photo-", ".png"); ok {
			return route{kind: rPNG, k: n}
		}
	}
	if s.has(ClassHuge) && p == "/big/archive.html" {
		return route{kind: rHuge}
	}
	if s.has(ClassGzipBomb) && p == "/bomb/data.html" {
		return route{kind: rBomb}
	}
	if p == "/list" && s.src().has(ClassURLVariants) {
		k, err := strconv.Atoi(q.Get("page"))
		if err == nil && k > 0 && k < s.n && len(q) == 2 && s.pagePath(k) == "/list?cat="+q.Get("cat")+"&page="+strconv.Itoa(k) {
			return route{kind: rPage, k: k}
		}
		return route{kind: rNotFound, status: 404}
	}
	// Ordinary pages: the number is the last digits of the path.
	i := strings.LastIndexByte(p, '-')
	if i > 0 {
		digits := p[i+1:]
		digits = strings.TrimSuffix(strings.TrimSuffix(digits, ".html"), ".txt")
		if k, err := strconv.Atoi(digits); err == nil && k > 0 && k < s.n && s.pagePath(k) == p {
			return route{kind: rPage, k: k, ref: q.Get("ref")}
		}
	}
	return route{kind: rNotFound, status: 404}
}

func hasPrint(k int) bool { return k%7 == 2 }

func portalDirPages(s *site) int { return max(1, (len(s.listed)+49)/50) }

// Links.

type hrefForm int

const (
	formAbs hrefForm = iota
	formRoot
	formRel
	formProtoRel
)

// link is one <a> on a page, as the model knows it.
type link struct {
	to       *site  // nil for a host that does not exist
	toName   string // host name when to is nil
	path     string // normalised path+query on the target
	nofollow bool
	form     hrefForm
	frag     string
	upper    bool // mixed-case host
	port80   bool // explicit default port
	reorder  bool // query parameters in another order
	sid      bool // session id appended
}

// pageLinks lists the links of page k on site s (for the home page of a
// portal also its directory pages).
func (sy *synth) pageLinks(s *site, k int) []link {
	src := s.src()
	r := rngFor(sy.seed, "links", src.name, k)
	n := s.n
	var out []link
	add := func(l link) {
		if l.to == nil && l.toName == "" {
			l.to = s
		}
		out = append(out, l)
	}
	if k > 0 {
		add(link{path: "/"})
		add(link{path: s.pagePath((k - 1) / 8)})
	}
	for c := 8*k + 1; c <= 8*k+8 && c < n; c++ {
		add(link{path: s.pagePath(c)})
	}
	for i := 0; i < 2+r.IntN(5); i++ {
		t := int(float64(n) * math.Pow(r.Float64(), 2.5))
		add(link{path: s.pagePath(min(t, n-1)), nofollow: src.has(ClassMetaRobots) && r.IntN(4) == 0})
	}
	if len(sy.sites) > 1 {
		for i := 0; i < r.IntN(3); i++ {
			hi := int(float64(len(sy.sites)) * math.Pow(r.Float64(), 1.7))
			t := sy.sites[min(hi, len(sy.sites)-1)]
			if t == s {
				continue
			}
			tk := int(float64(t.n) * math.Pow(r.Float64(), 2))
			add(link{to: t, path: t.pagePath(min(tk, t.n-1))})
		}
	}
	if s.portal && k == 0 {
		for j := 0; j < portalDirPages(s); j++ {
			add(link{path: fmt.Sprintf("/dir/%d.html", j)})
		}
	}
	special := k == 0 || k%11 == 3
	if src.has(ClassRedirects) && (special || k%9 == 4) {
		t := 1 + r.IntN(max(1, n-1))
		add(link{path: fmt.Sprintf("/old/%d", min(t, n-1))})
		if k == 0 && len(sy.sites) > 1 {
			hi := r.IntN(len(sy.sites))
			add(link{path: fmt.Sprintf("/go/%d/%d", hi, r.IntN(sy.sites[hi].n))})
		}
	}
	if src.has(ClassRedirectLoop) && k == 0 {
		add(link{path: "/loop/a"})
	}
	if src.has(ClassErrors) && special {
		add(link{path: fmt.Sprintf("/missing/%d.html", k)})
		add(link{path: fmt.Sprintf("/gone/%d.html", k)})
		add(link{path: fmt.Sprintf("/broken/%d.html", k)})
		if k == 0 {
			add(link{toName: "no-such-host.sim.test", path: "/"})
		}
	}
	if src.has(ClassTrap) && k == 0 {
		add(link{path: "/calendar/2024/01/"})
	}
	if src.has(ClassNearDup) && hasPrint(k) && k < n {
		add(link{path: fmt.Sprintf("/print/%d.html", k)})
	}
	if src.has(ClassNonHTML) && (k == 0 || k%8 == 1) {
		add(link{path: fmt.Sprintf("/files/report-%d.pdf", k)})
		add(link{path: fmt.Sprintf("/img/photo-%d.png", k)})
	}
	if src.has(ClassHuge) && k == 0 {
		add(link{path: "/big/archive.html"})
	}
	if src.has(ClassGzipBomb) && k == 0 {
		add(link{path: "/bomb/data.html"})
	}
	if src.has(ClassCanonical) && k%5 == 2 && n > 1 {
		t := 1 + r.IntN(n-1)
		if !s.isPlain(t) && !strings.Contains(s.pagePath(t), "?") {
			add(link{path: s.pagePath(t) + "?ref=related"})
		}
	}
	// Link forms.
	for i := range out {
		l := &out[i]
		sameHost := l.to == s
		switch {
		case !sameHost && r.IntN(6) == 0:
			l.form = formProtoRel
		case !sameHost:
			l.form = formAbs
		default:
			l.form = hrefForm(r.IntN(3))
		}
		if r.IntN(6) == 0 {
			l.frag = fmt.Sprintf("sec-%d", r.IntN(5))
		}
		if src.has(ClassURLVariants) {
			if l.form == formAbs || l.form == formProtoRel {
				l.upper = r.IntN(2) == 0
				l.port80 = r.IntN(3) == 0
			}
			l.reorder = strings.Contains(l.path, "&") && r.IntN(2) == 0
			l.sid = r.IntN(5) == 0
		}
	}
	return out
}

// pageFlags are the per-page robots meta facts.
func pageNoindex(s *site, k int) bool  { return s.src().has(ClassMetaRobots) && k%19 == 7 }
func pageNofollow(s *site, k int) bool { return s.src().has(ClassMetaRobots) && k%23 == 11 }
func pageHasBase(s *site, k int) bool  { return s.src().has(ClassURLVariants) && k%10 == 6 }

// basePath is the directory the <base href> of page k points at.
func basePath(k int) string { return fmt.Sprintf("/static/v%d/", k%3) }

// maxHostSeconds bounds how long the politeness a host asks for (latency,
// Crawl-delay, Retry-After) can stretch a sequential crawl of it, so that a
// test crawl of thousands of pages finishes in a minute or two.
const maxHostSeconds = 20

// crawlDelay is the Crawl-delay for user agent sou: 0.05-0.2 s, less on big
// hosts, at least 0.01 s.
func crawlDelay(s *site) float64 {
	d := float64([]int{5, 10, 20}[s.src().idx%3]) / 100
	limit := math.Floor(float64(maxHostSeconds)/float64(max(1, s.n))*100) / 100
	return max(0.01, min(d, limit))
}

// transientStatus is the status the first request of a page gets (0 = none):
// at most maxHostSeconds pages per host, since each costs a Retry-After.
func transientStatus(s *site, k int) int {
	src := s.src()
	switch {
	case src.has(ClassRateLimit) && k%3 == 0 && k/3 < maxHostSeconds:
		return 429
	case src.has(ClassErrors) && k%6 == 1 && k/6 < maxHostSeconds:
		return 503
	}
	return 0
}

// robots.txt contents and the truth derived from them.

type robotsFacts struct {
	status     int // final status of /robots.txt
	firstFails int // 503 answers before the final one
	body       string
	disallow   []string // for user agent "sou"
	allow      []string
	crawlDelay float64
	sitemaps   []string
}

func (sy *synth) robots(s *site, urlOf func(*site, string) string) robotsFacts {
	var f robotsFacts
	f.status = 200
	var sm []string
	if s.has(ClassSitemap) {
		sm = append(sm, urlOf(s, "/sitemap.xml"))
	}
	if s.has(ClassSitemapIndexGz) {
		sm = append(sm, urlOf(s, "/sitemap_index.xml.gz"))
	}
	smLines := ""
	for _, u := range sm {
		smLines += "Sitemap: " + u + "\n"
	}
	f.sitemaps = sm
	switch {
	case s.has(ClassRobotsMissing):
		f.status = 404
		f.sitemaps = nil
	case s.has(ClassRobotsRules) || s.has(ClassRobots5xx):
		delay := crawlDelay(s)
		f.crawlDelay = delay
		f.disallow = []string{"/members/"}
		f.allow = []string{"/members/public/"}
		f.body = "# robots.txt for " + s.name + "\n" +
			"User-agent: *\nDisallow: /private/\nDisallow: /members/\nCrawl-delay: 5\n\n" +
			"User-agent: sou\nUser-agent: examplebot\nDisallow: /members/\nAllow: /members/public/\n" +
			fmt.Sprintf("Crawl-delay: %g\n\n", delay) + smLines
		if s.has(ClassRobots5xx) {
			f.firstFails = 2
		}
	case s.has(ClassRobotsMalformed):
		f.disallow = []string{"/secret/"}
		f.body = "\ufeff<html><body>Robots</body></html>\r\n" +
			"this line is not a directive\n" +
			"USER-AGENT: *\r\n" +
			"  DISALLOW: /secret/   # keep out\n" +
			"Noindex: /secret/\n" +
			"Request-rate: 1/5\n" +
			"Disallow:\n" +
			"Allow\n" +
			smLines
	default:
		f.body = "User-agent: *\nDisallow:\n" + smLines
	}
	return f
}

// robotsAllows applies the longest-match rule of RFC 9309 (Allow wins ties)
// to a path+query.
func (f robotsFacts) allows(pathQuery string) bool {
	best, allowed := -1, true
	for _, d := range f.disallow {
		if strings.HasPrefix(pathQuery, d) && len(d) > best {
			best, allowed = len(d), false
		}
	}
	for _, a := range f.allow {
		if strings.HasPrefix(pathQuery, a) && len(a) >= best {
			best, allowed = len(a), true
		}
	}
	return allowed
}

// sortedQuery rewrites a path+query with its query parameters reversed
// (used for reordered-query links).
func reorderQuery(pq string) string {
	p, q, ok := strings.Cut(pq, "?")
	if !ok {
		return pq
	}
	parts := strings.Split(q, "&")
	sort.Sort(sort.Reverse(sort.StringSlice(parts)))
	return p + "?" + strings.Join(parts, "&")
}
