// Package simweb is the simulated web that every crawl test runs against:
// many virtual hosts behind one HTTP listener (selected by Host header), an
// authoritative DNS server that resolves them, and the ground truth (a truth
// listing and a request log) from which coverage, duplicate fetches, robots
// and politeness violations are computed.
//
// # Listeners
//
// HTTP binds a random loopback address 127.x.y.z (x >= 1, so never inside
// 127.0.0.0/16 where the LAN testnet's nodes live), port 80
// when it can (URLs then carry no port, like the real web), else a random
// high port that every URL carries. The same port is bound on [::1] (logged
// and skipped if IPv6 is unavailable). DNS (github.com/miekg/dns, UDP and
// TCP) binds port 53 on the same address, else a random high port. It is
// authoritative for every synthetic host (zone sim.test) and every corpus
// host: A = the HTTP address, AAAA = ::1 (only when the IPv6 listener is
// up), a per-host TTL (30..3600 s), NXDOMAIN with the SOA for unknown names,
// NODATA for other types. Names are case-insensitive; answers echo the
// question's case. The control server (/truth, /requests?since=N, /seeds)
// listens on Config.ControlAddr, default 127.0.0.1:random.
//
// # Synthetic mode
//
// Config.Hosts hosts named KIND-I.sim.test (KIND from blog, shop, wiki, forum,
// docs, edu, travel, news, photo, music by I mod 10; the first max(1,
// Hosts/50) are portal-I.sim.test), Config.Pages pages in total with a
// Zipf-like size per host (at least 12). Everything derives from Config.Seed:
// which host gets which misbehaviour, page paths, links and text. Nothing is
// stored: a page is generated on request from (seed, host, path), so 200
// hosts / 20,000 pages start in well under a second. Text is English from
// the embedded SUBTLEXus top-20k list (see WORDLIST.md for origin and
// licence), Chinese from the analyzer's embedded jieba dictionary (index.JiebaDictionary) weighted by
// its frequencies, or mixed; pages in a legacy charset only use words that
// the charset can encode (anything else would become a numeric character
// reference). Links: a tree (page k links its children 8k+1..8k+8, so every
// page hangs off the home page), back links, power-law random intra-host
// links, cross-host links, written absolute, protocol-relative,
// root-relative or relative (with ../) and sometimes with a #fragment.
// Seeds are each portal's home page and its first directory page; the
// directory pages list every other host.
//
// Misbehaviour classes (Config.Misbehave; nil or "all" = all, "none" = a
// well-behaved web; portals never misbehave), each on a share of hosts:
//
//	robots-rules       groups "*" (Disallow /private/, /members/, Crawl-delay 5) and
//	                   "sou" (Disallow /members/, Allow /members/public/, Crawl-delay 0.01-0.2):
//	                   sou must obey its own group only
//	robots-missing     /robots.txt is 404 (everything allowed)
//	robots-5xx         /robots.txt answers 503 (Retry-After: 1) twice per host, then as robots-rules
//	robots-malformed   BOM, HTML junk, CRLF, upper-case keys, unknown directives; only "Disallow: /secret/"
//	                   counts (/Secret/ and /secretive/ stay allowed)
//	sitemap            robots.txt names /sitemap.xml (the host's required pages)
//	sitemap-index-gz   robots.txt names /sitemap_index.xml.gz, a gzipped index of gzipped parts
//	charset-legacy     GBK, GB18030, Big5, Shift_JIS or ISO-8859-1, declared in the header, the meta or both
//	charset-undeclared GBK, Big5 or UTF-8 bytes with no declaration
//	charset-wrong      header says iso-8859-1 over UTF-8 bytes (meta right), or meta says utf-8 over GBK bytes
//	redirects          /old/N (301/302/307/308 to page N), /go/H/N (302/307 to another host)
//	redirect-loop      /loop/a <-> /loop/b
//	errors             /missing/ 404, /gone/ 410, /broken/ 500, a link to an NXDOMAIN host, and
//	                   every sixth page (at most 20 a host) answers 503 + Retry-After: 1 to its first request
//	rate-limit         every third page (at most 20 a host) answers 429 + Retry-After: 1 to its first request
//	slow               10-50 ms latency per request and a 256 KB/s - 1 MB/s bandwidth cap
//	blackhole          accepts connections and never answers (nothing required)
//	drip               sends 16 bytes every 250 ms, about a minute per page (nothing required)
//	trap               infinite calendar under /calendar/
//	mirror             the host is a full copy of another host (same paths and text)
//	near-dup           /print/N.html: page N plus one line, canonical to page N
//	huge               /big/archive.html, 11 MB of HTML
//	gzip-bomb          /bomb/data.html, ~110 KB with Content-Encoding: gzip inflating to 110 MB
//	malformed-html     unclosed tags, unquoted and upper-case attributes, a link in a comment and
//	                   one in a script (neither is a link), stray < and &
//	non-html           PDF and PNG links, text/plain pages under /notes/
//	meta-robots        meta robots noindex / nofollow pages, rel=nofollow links
//	canonical          every page has <link rel=canonical>, ?ref=related variants are linked
//	url-variants       mixed-case hosts, explicit :80, reordered query parameters, session ids
//	                   (?sid=), /list?cat=C&page=N pages, <base href> on some pages
//
// Generated pages carry Last-Modified and ETag (If-None-Match and
// If-Modified-Since get 304) and are gzip-compressed when the request's
// Accept-Encoding allows it (except on drip hosts).
//
// Politeness costs are bounded so that a test crawl stays short: latency,
// Crawl-delay and the number of Retry-After answers are capped so that a
// sequential crawl of any one host needs at most about 20 s of waiting.
//
// The word lists are loaded once per process into immutable package state
// (the per-charset subsets of the Chinese list are cached behind a mutex).
//
// # Directory mode
//
// Config.Sites names a sites.tsv (HOST<TAB>DOCROOT<TAB>SEEDS comma-separated
// paths<TAB>ROLE main|mirror), the format ../shared/corpus/install.sh writes.
// Each DOCROOT is served at http://HOST/: directories redirect to their
// trailing-slash form and serve index.html (no listings), symlinks are
// followed, .html is sent as "text/html" with no charset parameter (the
// pages declare their own), query strings are ignored. No robots.txt
// unless the docroot has one (the truth assumes none). The truth walk
// parses every reachable page (x/net/html, charset sniffing), so with the
// full corpus it runs in the background and Truth() waits for it. Links to
// hosts outside the simulated web are not listed. The walk also reads the
// external scripts a page includes from its own host (<script src> of a
// type browsers run, at most 32 a page), once each, as a crawler that
// follows the links scripts write must (script.go): the string literals
// that name an HTML page (a path ending in .html or .htm, written without
// escapes, outside comments and regular expressions), resolved against the
// base URL of the first page that included the script in walk order, not
// against the script's own URL; the first 2 MB of a script and 5,000
// links count, the bytes decoded from the including page's charset. For a site with ROLE
// mirror, the walk looks for the main site (and first-level subdirectory of
// it) that holds the same relative paths, from a sample of 30 pages; when
// one matches, the host's mirror_of and each page's mirror_of point there.
//
// # Truth
//
// Truth.Pages lists, sorted by URL, every URL that a correct, polite crawler
// meets when it starts at the seeds and follows links: not rel=nofollow, not
// from meta-nofollow pages, redirects followed, and on directory sites the
// same-host external scripts and the pages they name (see Directory mode).
// A URL is listed once, as what it was first met as. URLs are normalised by
// Normalize: lowercase scheme and host, default port removed, dot segments
// resolved, fragment dropped, SessionParams (sid, sessionid, phpsessid,
// jsessionid) removed, query parameters sorted. An entry with required=true
// is a page the crawler must fetch and count for coverage: status 200,
// text/html or text/plain (transient 429/503 answers, mirrors,
// near-duplicates, canonical variants and noindex pages included). Every
// other entry has excluded set to one reason: redirect, redirect_loop,
// not_found, gone, server_error, robots (fetching it is a robots violation),
// trap, never_answers, drip, oversize, gzip_bomb, not_html (for a script:
// served with a type a crawler does not read), nxdomain, unreadable,
// script (an external script, read for its links only: fetched once, not a
// page). Entries behind an excluded entry (past a trap, a disallowed
// page or a dead host) are not listed.
//
// JSON of GET /truth and --truth-out:
//
//	{
//	  "seed": 1, "http_addr": "127.9.8.7:80", "http6_addr": "[::1]:80", "dns_addr": "127.9.8.7:53",
//	  "user_agent": "sou", "session_params": ["sid","sessionid","phpsessid","jsessionid"],
//	  "classes": ["robots-rules", ...],            // classes switched on
//	  "seeds": ["http://portal-0.sim.test/", ...],
//	  "required": 19232,                           // count of pages with required=true
//	  "hosts": [{
//	    "host": "news-17.sim.test", "mode": "synthetic|directory", "role": "portal|main|mirror",
//	    "kind": "news", "classes": ["charset-undeclared", ...], "mirror_of": "blog-3.sim.test",
//	    "docroot": "/usr/share/...",               // directory mode only
//	    "ttl": 1234, "charset": "big5", "declared_http": "", "declared_meta": "", "lang": "zh",
//	    "robots_status": 200,                      // final status of /robots.txt
//	    "robots_first_5xx": 2,                     // 503 answers before it
//	    "crawl_delay": 0.2,                        // seconds, for user agent sou (0 = none)
//	    "disallow": ["/members/"], "allow": ["/members/public/"],   // prefixes for sou, longest match wins
//	    "sitemaps": ["http://news-17.sim.test/sitemap.xml"], "trap_prefixes": ["/calendar/"],
//	    "latency_ms": 30, "bandwidth_bps": 524288, "pages_total": 120, "pages_required": 97
//	  }],
//	  "pages": [{
//	    "url": "http://news-17.sim.test/world/2016/item-4.html", "host": "news-17.sim.test",
//	    "status": 200, "content_type": "text/html", "required": true,
//	    "excluded": "",                            // reason when required is false
//	    "redirect_to": "",                         // normalised Location of a 3xx
//	    "transient_status": 429,                   // status of the first request (then 200)
//	    "title": "...",                            // decoded, whitespace-collapsed title ("" for text/plain)
//	    "charset": "big5",                         // encoding of the bytes
//	    "noindex": false, "nofollow": false,
//	    "canonical": "http://...", "mirror_of": "http://...", "near_duplicate_of": "http://...",
//	    "in_sitemap": true, "seed": false, "depth": 3
//	  }]
//	}
//
// Empty strings, false and 0 are omitted from page entries.
//
// # Request log
//
// Every HTTP request (both listeners) is logged when it ends, including
// requests the server gave up on. GET /requests?since=N returns the entries
// with index >= N as a JSON array; --requests-out writes all of them on exit:
//
//	[{
//	  "index": 0,
//	  "start": "2026-11-23T00:40:00.123456789Z", "end": "...",   // RFC 3339, UTC
//	  "start_unix_ns": 1795394400123456789, "end_unix_ns": ..., "duration_ns": 1834000,
//	  "client": "127.0.0.1:51234",        // remote address
//	  "local": "127.9.8.7:80",            // listener address (v4 or [::1])
//	  "host": "News-17.SIM.test",         // Host header as sent
//	  "vhost": "news-17.sim.test",        // lowercase, without port
//	  "method": "GET", "target": "/world/2016/item-4.html?sid=1f",    // request URI as sent
//	  "url": "http://news-17.sim.test/world/2016/item-4.html",        // normalised
//	  "status": 200,                      // 0 = no response (blackhole)
//	  "bytes": 5120,                      // body bytes written
//	  "completed": true,                  // whole response written, client still there
//	  "user_agent": "sou/0.1"
//	}]
package simweb
