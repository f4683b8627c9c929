package node

// The web UI: a server-rendered search page (works without JavaScript) in
// the spirit of the Tianwang result page, and a node dashboard. Decisions:
//
//   - html/template and go:embed only, no build step. sou.js enhances the
//     pages when JavaScript runs (a "searching…" state, fetch of
//     /api/search, history.pushState; a dashboard polled every second);
//     without it the search is a plain GET form and the dashboard refreshes
//     itself with a <noscript> meta refresh and posts seeds to
//     /dashboard/seed (form-encoded).
//   - The UI language follows ?lang= (zh or en), else Accept-Language; a
//     few labels (cached 快照, searching… 搜索中) carry both languages.
//     The same language (any tag: zh-TW; else Accept-Language's first)
//     gives the search its reader's script (search.Request.Script), for
//     the UI and the JSON API alike (readerScript).
//     The JavaScript reads its strings from data- attributes the server
//     rendered, so one table (uiTexts) holds every text.
//   - The pages obey the API's access rules: the search page is public
//     (like /api/search), the dashboard private (like /api/status) and
//     POST /dashboard/seed mutating (like POST /api/crawl). Cross-origin
//     posts are refused (net/http's CrossOriginProtection, in mutating), so
//     another web site cannot add seeds through a user's loopback node. On
//     a node with a token a browser logs in at /login (session.go) and a
//     UI page asked without a session redirects there.
//   - Nothing that came from a peer or a crawled page is ever HTML here:
//     titles, URLs and snippets are text (search.Result), the template
//     escapes them and sou.js builds the result list with textContent; the
//     <b> of a highlight is added around the coordinator's highlight ranges
//     (search.SnippetParts).
//   - A strict Content-Security-Policy: no inline script, no third-party
//     anything. Cached copies of pages get their own, stricter policy
//     (cacheCSP in api.go): a sandbox with no script, no form and nothing
//     loaded from elsewhere.

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"

	"sou/search"
)

//go:embed ui/*.html ui/*.css ui/*.js
var uiFiles embed.FS

var uiTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"add":   func(a, b int) int { return a + b },
	"bytes": humanBytes,
	"ago":   func(t time.Time) string { return time.Since(t).Round(time.Second).String() },
	"short": shortID,
}).ParseFS(uiFiles, "ui/*.html"))

// uiCSP allows only the node's own script and style sheet.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// uiText is every string the pages show, in one language.
type uiText struct {
	Lang, Code, Title, Search, Placeholder, Dashboard, Home  string
	Stats, Partial, NoResults, Cached, Prev, Next, Searching string
	Similar, Error, Other, OtherName, FirstUse, Page         string
	// Dashboard.
	Members, Keyspace, KeyspaceFmt, Crawl, Rate, Frontier, Fetched  string
	Stored, Index, Docs, Postings, Pending, Outbox, Storage         string
	Errors, NoErrors, ErrorsByClass, AddSeeds, SeedHelp, SeedButton string
	Accepted, Rejected, Live, Uptime, Peer, Idle, Busy, LastSeen    string
	Latency, Load, Self, NoJS                                       string
	// Login.
	Login, LoginHelp, Token, LoginButton, WrongToken, TooManyLogins, Logout string
}

var uiTexts = map[string]*uiText{
	"en": {
		Lang: "en", Code: "en", Title: "sou 搜 — peer-to-peer web search", Search: "Search", Placeholder: "search the sou network",
		Dashboard: "Dashboard", Home: "Search",
		Stats:     "{total} results · {ms} ms · {answered} of {asked} peers answered",
		Partial:   "Partial results: {missing} of {asked} peers did not answer in time ({names}); the pages they hold are missing here. Try again in a moment.",
		NoResults: "No results for “{q}”. Try other or fewer words.",
		Cached:    "cached 快照", Prev: "« Previous", Next: "Next »", Searching: "searching… 搜索中",
		Similar: "similar pages", Error: "Error", Other: "zh", OtherName: "中文",
		FirstUse: "Add seed URLs on the dashboard, wait for the crawl, then search.", Page: "Page",
		Members: "Members", Keyspace: "Keyspace", KeyspaceFmt: "key prefix {prefix} · owns {owned} of {known} known hosts",
		Crawl: "Crawl", Rate: "fetch rate (pages/s)", Frontier: "frontier (queued URLs)", Fetched: "fetched",
		Stored: "stored", Index: "Index", Docs: "documents", Postings: "postings", Pending: "pending",
		Outbox: "outbox (URLs for peers)", Storage: "storage (LSM + value log)",
		Errors: "Recent errors", NoErrors: "none", ErrorsByClass: "errors by class", AddSeeds: "Add seed URLs",
		SeedHelp: "One URL per line (http or https).", SeedButton: "Add to crawl",
		Accepted: "accepted: {n}", Rejected: "rejected", Live: "live", Uptime: "uptime", Peer: "peer",
		Idle: "idle", Busy: "crawling", LastSeen: "last seen", Latency: "search latency", Load: "load (pages / frontier / hosts)",
		Self: "this node", NoJS: "JavaScript is off: this page reloads every 5 s.",
		Login: "Log in", LoginHelp: "This node is protected by a token (its --http-token). Enter it once; this browser stays logged in for 12 hours.",
		Token: "Token", LoginButton: "Log in", WrongToken: "Wrong token.",
		TooManyLogins: "Too many failed logins from your address: try again in {s} s.", Logout: "Log out",
	},
	"zh": {
		Lang: "zh-CN", Code: "zh", Title: "sou 搜 — 对等网络搜索引擎", Search: "搜索", Placeholder: "在 sou 网络中搜索",
		Dashboard: "节点状态", Home: "搜索",
		Stats:     "找到 {total} 条结果 · 用时 {ms} 毫秒 · {asked} 个节点中 {answered} 个已响应",
		Partial:   "部分结果：{asked} 个节点中有 {missing} 个未及时响应（{names}），它们保存的网页不在此页中。请稍后再试。",
		NoResults: "没有找到与“{q}”相关的网页。请换用其他或更少的词语。",
		Cached:    "cached 快照", Prev: "« 上一页", Next: "下一页 »", Searching: "searching… 搜索中",
		Similar: "相似网页", Error: "错误", Other: "en", OtherName: "English",
		FirstUse: "请先在节点状态页添加种子网址，等待抓取后再搜索。", Page: "页",
		Members: "成员", Keyspace: "键空间", KeyspaceFmt: "键前缀 {prefix} · 负责已知 {known} 个主机中的 {owned} 个",
		Crawl: "抓取", Rate: "抓取速率（页/秒）", Frontier: "待抓取队列", Fetched: "已抓取",
		Stored: "已保存", Index: "索引", Docs: "文档", Postings: "倒排表", Pending: "待索引",
		Outbox: "发件箱（待转发网址）", Storage: "存储（LSM + 值日志）",
		Errors: "最近错误", NoErrors: "无", ErrorsByClass: "错误分类", AddSeeds: "添加种子网址",
		SeedHelp: "每行一个网址（http 或 https）。", SeedButton: "加入抓取",
		Accepted: "已接受：{n}", Rejected: "已拒绝", Live: "实时", Uptime: "运行时间", Peer: "节点",
		Idle: "空闲", Busy: "抓取中", LastSeen: "最近活动", Latency: "搜索延迟", Load: "负载（页面 / 队列 / 主机）",
		Self: "本节点", NoJS: "JavaScript 已关闭：本页每 5 秒刷新。",
		Login: "登录", LoginHelp: "本节点受令牌保护（即其 --http-token）。输入一次即可，本浏览器在 12 小时内保持登录。",
		Token: "令牌", LoginButton: "登录", WrongToken: "令牌错误。",
		TooManyLogins: "来自您地址的失败登录过多：请 {s} 秒后再试。", Logout: "退出登录",
	},
}

// maxAcceptLanguage bounds the Accept-Language header read.
const maxAcceptLanguage = 512

var uiLangMatcher = language.NewMatcher([]language.Tag{language.English, language.Chinese})

// uiLanguage picks the page language: ?lang= first, then Accept-Language.
func uiLanguage(r *http.Request) *uiText {
	if l := r.URL.Query().Get("lang"); l == "zh" || l == "en" {
		return uiTexts[l]
	}
	accept := r.Header.Get("Accept-Language")
	if len(accept) > maxAcceptLanguage {
		accept = accept[:maxAcceptLanguage]
	}
	tags, _, err := language.ParseAcceptLanguage(accept)
	if err != nil || len(tags) == 0 {
		return uiTexts["en"]
	}
	_, idx, _ := uiLangMatcher.Match(tags...)
	if idx == 1 {
		return uiTexts["zh"]
	}
	return uiTexts["en"]
}

// fill replaces {name} placeholders; the JavaScript does the same.
func fill(format string, kv ...string) string {
	return strings.NewReplacer(kv...).Replace(format)
}

// searchPage is what search.html renders.
type searchPage struct {
	T         *uiText
	Query     string
	Start     int // rank of the first result on the page
	Resp      *search.Response
	Error     string
	Stats     string
	Partial   string
	Empty     string
	Results   []uiResult
	Pages     []uiPageLink
	Prev      string
	Next      string
	LangHref  string
	LangParam string // an explicit ?lang=, kept by the form
	LoggedIn  bool
}

type uiResult struct {
	search.Result
	CacheHref string
	// Parts is the snippet cut at its highlights.
	Parts []search.SnippetPart
}

type uiPageLink struct {
	Num     int
	Href    string
	Current bool
}

func (n *Node) registerUI(mux *http.ServeMux, g *httpGuard) {
	mux.HandleFunc("GET /{$}", g.public(g.limited(n.handleSearchPage)))
	mux.HandleFunc("GET /dashboard", g.private(n.handleDashboard))
	mux.HandleFunc("POST /dashboard/seed", g.mutating(n.handleDashboardSeed))
	mux.HandleFunc("GET /login", n.handleLoginPage(g))
	mux.HandleFunc("POST /login", n.handleLogin(g))
	mux.HandleFunc("POST /logout", n.handleLogout(g))
	static, _ := fs.Sub(uiFiles, "ui")
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /ui/{file}", func(w http.ResponseWriter, r *http.Request) {
		f := r.PathValue("file")
		if !strings.HasSuffix(f, ".css") && !strings.HasSuffix(f, ".js") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		http.StripPrefix("/ui/", files).ServeHTTP(w, r)
	})
}

// searchHref is the UI URL of a result page.
func searchHref(q string, page int, lang string) string {
	v := url.Values{"q": {q}}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if lang != "" {
		v.Set("lang", lang)
	}
	return "/?" + v.Encode()
}

// handleSearchPage renders results on the server, so search works without
// JavaScript.
func (n *Node) handleSearchPage(w http.ResponseWriter, r *http.Request) {
	t := uiLanguage(r)
	p := searchPage{T: t, Query: r.URL.Query().Get("q"), LoggedIn: hasSession(r)}
	lang := r.URL.Query().Get("lang")
	if lang != "zh" && lang != "en" {
		lang = ""
	}
	p.LangParam = lang
	p.LangHref = "/?lang=" + t.Other
	if len(p.Query) <= maxQueryParam && strings.TrimSpace(p.Query) != "" {
		p.LangHref = searchHref(p.Query, 1, t.Other)
	}
	status := http.StatusOK
	if strings.TrimSpace(p.Query) != "" || r.URL.Query().Has("page") {
		req, err := searchRequest(r)
		if err == nil {
			p.Resp, err = n.Search(r.Context(), req)
		}
		switch {
		case err == nil:
			n.fillSearchPage(&p, req, lang)
		case errors.Is(err, search.ErrBadRequest) || req.Query == "" || len(req.Query) > maxQueryParam || req.Page == 0 || req.N == 0:
			p.Error = err.Error()
			status = http.StatusBadRequest
		default:
			n.errs.add("search", err)
			p.Error = "search failed: " + err.Error()
			status = http.StatusServiceUnavailable
		}
		if len(p.Query) > maxQueryParam {
			p.Query = p.Query[:maxQueryParam]
		}
	}
	n.renderUI(w, status, "search.html", p)
}

func (n *Node) fillSearchPage(p *searchPage, req search.Request, lang string) {
	resp := p.Resp
	cov := resp.Coverage
	p.Stats = fill(p.T.Stats, "{total}", strconv.FormatInt(resp.Total, 10), "{ms}", strconv.FormatFloat(resp.ElapsedMS, 'f', 1, 64),
		"{answered}", strconv.Itoa(cov.Answered), "{asked}", strconv.Itoa(cov.Asked))
	if !cov.Complete {
		var names []string
		for _, s := range cov.Shards {
			if s.State != "answered" {
				names = append(names, shortID(s.Member)+" "+s.State)
			}
		}
		p.Partial = fill(p.T.Partial, "{missing}", strconv.Itoa(cov.Asked-cov.Answered), "{asked}", strconv.Itoa(cov.Asked),
			"{names}", strings.Join(names, ", "))
	}
	if resp.Total == 0 {
		p.Empty = fill(p.T.NoResults, "{q}", req.Query)
	}
	for _, res := range resp.Results {
		v := url.Values{"url": {res.URL}, "q": {req.Query}}
		p.Results = append(p.Results, uiResult{Result: res, CacheHref: "/api/cache?" + v.Encode(),
			Parts: search.SnippetParts(res.Snippet, res.Highlights)})
	}
	p.Start = (req.Page-1)*req.N + 1
	pages := int((resp.Total + int64(req.N) - 1) / int64(req.N))
	pages = min(pages, search.MaxPage)
	if req.Page > 1 {
		p.Prev = searchHref(req.Query, req.Page-1, lang)
	}
	if req.Page < pages {
		p.Next = searchHref(req.Query, req.Page+1, lang)
	}
	if pages > 1 {
		lo := max(1, min(req.Page, pages)-4)
		hi := min(pages, lo+9)
		for i := lo; i <= hi; i++ {
			p.Pages = append(p.Pages, uiPageLink{Num: i, Href: searchHref(req.Query, i, lang), Current: i == req.Page})
		}
	}
}

func (n *Node) renderUI(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", uiCSP)
	w.WriteHeader(status)
	if err := uiTemplates.ExecuteTemplate(w, name, data); err != nil {
		n.log.Warn("render page", "page", name, "err", err)
	}
}

// dashboardPage is what dashboard.html renders.
type dashboardPage struct {
	T        *uiText
	S        Status
	Peers    []PeerInfo
	Keyspace string
	Classes  []classCount
	Message  string
	Rejected []string
	Error    string
	Seeds    string
	LangHref string
	// Refresh is the no-JavaScript reload period in seconds; the reload
	// always GETs /dashboard, so a seed post is never repeated.
	Refresh  int
	LoggedIn bool
}

type classCount struct {
	Class string
	Count int64
}

func (n *Node) dashboardData(r *http.Request) dashboardPage {
	t := uiLanguage(r)
	d := dashboardPage{T: t, S: n.Status(r.Context()), Peers: n.peers(), LangHref: "/dashboard?lang=" + t.Other, Refresh: 5,
		LoggedIn: hasSession(r)}
	d.Keyspace = fill(t.KeyspaceFmt, "{prefix}", d.S.KeyPrefix, "{owned}", strconv.Itoa(d.S.OwnedHosts), "{known}", strconv.Itoa(d.S.KnownHosts))
	for c, k := range d.S.Crawl.ErrorsByClass {
		d.Classes = append(d.Classes, classCount{c, k})
	}
	sort.Slice(d.Classes, func(i, j int) bool { return d.Classes[i].Class < d.Classes[j].Class })
	// Newest errors first, at most 20.
	errs := d.S.Errors
	d.S.Errors = nil
	for i := len(errs) - 1; i >= 0 && len(d.S.Errors) < 20; i-- {
		d.S.Errors = append(d.S.Errors, errs[i])
	}
	return d
}

func (n *Node) handleDashboard(w http.ResponseWriter, r *http.Request) {
	n.renderUI(w, http.StatusOK, "dashboard.html", n.dashboardData(r))
}

// handleDashboardSeed is the no-JavaScript seed form: urls is one URL per
// line (or separated by spaces).
func (n *Node) handleDashboardSeed(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxCrawlBody)
	err := r.ParseForm()
	d := n.dashboardData(r)
	d.Refresh = 30 // leave time to read the answer
	var urls []string
	if err == nil {
		d.Seeds = r.PostForm.Get("urls")
		urls = strings.Fields(d.Seeds)
		switch {
		case len(urls) == 0:
			err = errors.New("urls is required: one http(s) URL per line")
		case len(urls) > maxCrawlURLs:
			err = fmt.Errorf("urls: at most %d URLs at once, got %d", maxCrawlURLs, len(urls))
		}
	} else {
		err = fmt.Errorf("form: %w", err)
	}
	if len(d.Seeds) > 64<<10 {
		d.Seeds = "" // do not echo huge input back
	}
	if err != nil {
		d.Error = err.Error()
		n.renderUI(w, http.StatusBadRequest, "dashboard.html", d)
		return
	}
	accepted, err := n.AddSeeds(r.Context(), urls)
	var bad *BadURLsError
	status := http.StatusOK
	switch {
	case errors.As(err, &bad) && accepted == 0:
		d.Error, status = err.Error(), http.StatusBadRequest
	case errors.As(err, &bad):
		d.Message, d.Rejected, d.Seeds = fill(d.T.Accepted, "{n}", strconv.Itoa(accepted)), bad.Bad, ""
	case err != nil:
		n.errs.add("crawl add", err)
		d.Error, status = err.Error(), http.StatusServiceUnavailable
	default:
		d.Message, d.Seeds = fill(d.T.Accepted, "{n}", strconv.Itoa(accepted)), ""
	}
	n.renderUI(w, status, "dashboard.html", d)
}

func shortID(id string) string {
	if len(id) > 12 {
		return "…" + id[len(id)-8:]
	}
	return id
}

func humanBytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for v := b / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

func htmlEscape(s string) string { return template.HTMLEscapeString(s) }
