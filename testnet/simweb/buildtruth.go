package simweb

import (
	"strings"
)

// buildTruth walks the web from the seeds and publishes the truth.
func (w *Web) buildTruth() {
	defer close(w.ready)
	findMirrorSources(w.dirs)
	pages := walk(w.seeds, w.visit, w.done)
	t := &Truth{
		Seed: w.cfg.Seed, HTTPAddr: w.httpAddr, HTTP6Addr: w.http6Addr, DNSAddr: w.dnsAddr,
		UserAgent: UserAgent, SessionParams: SessionParams, Seeds: w.Seeds(), Classes: []string{},
	}
	for _, c := range AllClasses {
		if w.classes[c] && w.cfg.Hosts > 0 {
			t.Classes = append(t.Classes, c)
		}
	}
	required := map[string]int{}
	for i := range pages {
		p := &pages[i]
		if p.Required {
			t.Required++
			required[p.Host]++
			if s, ok := w.sy.byName[p.Host]; ok && (s.has(ClassSitemap) || s.has(ClassSitemapIndexGz)) {
				p.InSitemap = true
			}
		}
	}
	t.Pages = pages
	for _, s := range w.sy.sites {
		rf := w.robots[s]
		h := HostTruth{
			Host: s.name, Mode: "synthetic", Role: "main", Kind: s.kind, Classes: s.sortedClasses(), TTL: s.ttl,
			Charset: s.charset, DeclaredHTTP: s.declHdr, DeclaredMeta: s.declMeta, Lang: s.lang,
			RobotsStatus: rf.status, RobotsFirst5x: rf.firstFails, CrawlDelay: rf.crawlDelay,
			Disallow: nonNil(rf.disallow), Allow: nonNil(rf.allow), Sitemaps: nonNil(rf.sitemaps), TrapPrefixes: []string{},
			LatencyMS: int(s.latency.Milliseconds()), BandwidthBps: s.bandwidth, PagesTotal: s.n, PagesRequired: required[s.name],
		}
		if s.portal {
			h.Role = "portal"
		}
		if s.mirrorOf != nil {
			h.Role, h.MirrorOf = "mirror", s.mirrorOf.name
		}
		if s.has(ClassTrap) {
			h.TrapPrefixes = []string{"/calendar/"}
		}
		t.Hosts = append(t.Hosts, h)
	}
	for _, d := range w.dirs {
		h := HostTruth{
			Host: d.name, Mode: "directory", Role: d.role, Classes: []string{}, Docroot: d.root, TTL: d.ttl,
			RobotsStatus: 404, Disallow: []string{}, Allow: []string{}, Sitemaps: []string{}, TrapPrefixes: []string{},
			PagesRequired: required[d.name],
		}
		if d.mirrorSrc != nil {
			h.MirrorOf = d.mirrorSrc.name
		}
		t.Hosts = append(t.Hosts, h)
	}
	w.truth = t
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// visit is the truth walk's view of one normalised URL; script is set
// when it was met as an external script.
func (w *Web) visit(u string, script *scriptRef) outcome {
	hp := hostOf(u)
	name := hp
	if i := strings.LastIndexByte(hp, ':'); i >= 0 {
		name = hp[:i]
	}
	if w.knownHost(hp) {
		if s, ok := w.sy.byName[name]; ok {
			return w.visitSynth(s, u)
		}
		if d, ok := w.dirByName[name]; ok {
			if script != nil {
				return w.visitScript(d, u, *script)
			}
			return w.visitDir(d, u)
		}
	}
	return outcome{page: PageTruth{Host: name, Excluded: ExclNXDomain}}
}

func (w *Web) linkURL(s *site, l link) string {
	name := l.toName
	if l.to != nil {
		name = l.to.name
	}
	return "http://" + name + w.portSuffix + l.path
}

func (w *Web) visitSynth(s *site, u string) outcome {
	pt := PageTruth{Host: s.name}
	if s.has(ClassBlackhole) {
		pt.Excluded = ExclNeverAnswers
		return outcome{page: pt}
	}
	if s.has(ClassDrip) {
		pt.Status, pt.Excluded = 200, ExclDrip
		return outcome{page: pt}
	}
	p, q := pathQueryOf(u)
	pq := p
	if q != "" {
		pq += "?" + q
	}
	if rf := w.robots[s]; rf.status == 200 && !rf.allows(pq) {
		pt.Excluded = ExclRobots
		return outcome{page: pt}
	}
	rt := w.sy.route(s, p, q, w.urlOf)
	var links []string
	follow := func(ls []link) {
		for _, l := range ls {
			if !l.nofollow {
				links = append(links, w.linkURL(s, l))
			}
		}
	}
	switch rt.kind {
	case rPage, rPrint:
		pt.Status, pt.Required, pt.Charset = 200, true, s.charset
		pt.ContentType = "text/html"
		if s.isPlain(rt.k) {
			pt.ContentType = "text/plain"
		}
		pt.Title = w.pageTitle(s, rt.k)
		if s.mirrorOf != nil {
			pt.MirrorOf = w.urlOf(s.mirrorOf, pq)
		}
		if rt.kind == rPrint {
			pt.NearDuplicateOf = w.urlOf(s, s.pagePath(rt.k))
			pt.Canonical = pt.NearDuplicateOf
			links = append(links, pt.NearDuplicateOf)
			break
		}
		pt.TransientStatus = transientStatus(s, rt.k)
		if pt.ContentType == "text/plain" {
			break
		}
		pt.Noindex, pt.Nofollow = pageNoindex(s, rt.k), pageNofollow(s, rt.k)
		if s.has(ClassCanonical) {
			pt.Canonical = w.urlOf(s, s.pagePath(rt.k))
		}
		if !pt.Nofollow {
			follow(w.sy.pageLinks(s, rt.k))
		}
	case rDir:
		pt.Status, pt.Required, pt.Charset, pt.ContentType = 200, true, "utf-8", "text/html"
		pt.Title = dirTitle(s, rt.k)
		follow(w.dirLinks(s, rt.k))
	case rOldRedirect, rGoRedirect, rLoop:
		pt.Status, pt.Excluded = rt.status, ExclRedirect
		if rt.kind == rLoop {
			pt.Excluded = ExclRedirectLoop
		}
		to, err := Normalize(rt.location)
		if err == nil {
			pt.RedirectTo = to
			links = append(links, to)
		}
	case rGone:
		pt.Status, pt.Excluded = 410, ExclGone
	case rBroken:
		pt.Status, pt.Excluded = 500, ExclServerError
	case rCalendar:
		pt.Status, pt.Excluded, pt.ContentType = 200, ExclTrap, "text/html"
	case rPDF:
		pt.Status, pt.Excluded, pt.ContentType = 200, ExclNotHTML, "application/pdf"
	case rPNG:
		pt.Status, pt.Excluded, pt.ContentType = 200, ExclNotHTML, "image/png"
	case rHuge:
		pt.Status, pt.Excluded, pt.ContentType = 200, ExclOversize, "text/html"
	case rBomb:
		pt.Status, pt.Excluded, pt.ContentType = 200, ExclGzipBomb, "text/html"
	default:
		pt.Status, pt.Excluded = 404, ExclNotFound
	}
	return outcome{page: pt, links: links}
}
