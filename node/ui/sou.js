// sou 搜 — progressive enhancement for the search page and the dashboard.
// Every page works without this file; with it the search shows a
// "searching…" state and updates in place (history kept in sync), and the
// dashboard refreshes itself every second. Everything a result carries
// (title, URL, snippet) came from a peer and is set as text, never as HTML.
(function () {
  "use strict";

  function fill(format, values) {
    return format.replace(/\{(\w+)\}/g, function (m, k) {
      return Object.prototype.hasOwnProperty.call(values, k) ? String(values[k]) : m;
    });
  }

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }

  function shortID(id) { return id && id.length > 12 ? "…" + id.slice(-8) : id; }

  // snippetNodes is a result's plain-text snippet with its highlights
  // ([start, end) in code points) in <b>; ranges out of order or out of
  // bounds are ignored.
  function snippetNodes(text, ranges) {
    var cps = Array.from(text || ""), out = [], at = 0;
    (ranges || []).forEach(function (r) {
      if (!Array.isArray(r) || !(r[0] >= at && r[1] > r[0] && r[1] <= cps.length)) return;
      if (r[0] > at) out.push(document.createTextNode(cps.slice(at, r[0]).join("")));
      out.push(el("b", { text: cps.slice(r[0], r[1]).join("") }));
      at = r[1];
    });
    if (at < cps.length) out.push(document.createTextNode(cps.slice(at).join("")));
    return out;
  }

  async function fetchJSON(url, opts) {
    var resp = await fetch(url, Object.assign({ headers: { Accept: "application/json" }, credentials: "same-origin" }, opts || {}));
    if (resp.status === 401 && document.body.dataset.login) {
      // The session ended: log in again and come back here.
      location.assign("/login?" + new URLSearchParams({ next: location.pathname + location.search }).toString());
    }
    var body;
    try { body = await resp.json(); } catch (e) { body = { error: resp.status + " " + resp.statusText }; }
    if (!resp.ok) throw new Error(body && body.error ? body.error : resp.status + " " + resp.statusText);
    return body;
  }

  // ---- search page ----
  function initSearch(body) {
    var t = body.dataset;
    var form = document.getElementById("search");
    var input = form.querySelector("input[name=q]");
    var langInput = form.querySelector("input[name=lang]");
    var results = document.getElementById("results");
    var searching = document.getElementById("searching");
    var button = form.querySelector("button");
    var seq = 0;

    function uiURL(q, page) {
      var p = new URLSearchParams({ q: q });
      if (page > 1) p.set("page", page);
      if (langInput) p.set("lang", langInput.value);
      return "/?" + p.toString();
    }

    function render(q, page, r) {
      var cov = r.coverage || {};
      var out = [];
      out.push(el("p", { class: "stats", id: "stats", text: fill(t.stats, {
        total: r.total, ms: (r.elapsed_ms || 0).toFixed(1), answered: cov.answered, asked: cov.asked }) }));
      if (!cov.complete) {
        var names = (cov.shards || []).filter(function (s) { return s.state !== "answered"; })
          .map(function (s) { return shortID(s.member) + " " + s.state; }).join(", ");
        out.push(el("p", { class: "msg warn", id: "partial", role: "alert", text: fill(t.partial, {
          missing: (cov.asked || 0) - (cov.answered || 0), asked: cov.asked, names: names }) }));
      }
      var hits = r.results || [];
      if (hits.length === 0) out.push(el("p", { class: "msg", id: "noresults", text: fill(t.noresults, { q: q }) }));
      var ol = el("ol", { class: "hits", start: (page - 1) * r.n + 1 });
      hits.forEach(function (h) {
        var snippet = el("div", { class: "s" }, snippetNodes(h.snippet, h.highlights));
        var cache = new URLSearchParams({ url: h.url, q: q });
        var meta = [el("span", { class: "url", text: h.url }), " · ", el("a", { class: "cached", href: "/api/cache?" + cache.toString(), text: t.cached })];
        if (h.duplicates && h.duplicates.length) meta.push(" · ", el("span", { class: "dups", text: h.duplicates.length + " " + t.similar }));
        var a = el("a", { class: "t", text: h.title || h.url });
        if (/^https?:\/\//i.test(h.url)) a.href = h.url;
        ol.appendChild(el("li", { class: "hit" }, [a, snippet, el("div", { class: "u" }, meta)]));
      });
      out.push(ol);
      var pages = Math.min(Math.ceil(r.total / r.n), 50);
      if (pages > 1) {
        var nav = el("nav", { class: "pager", "aria-label": "pages" });
        if (page > 1) nav.appendChild(el("a", { class: "prev", rel: "prev", href: uiURL(q, page - 1), "data-page": page - 1, text: t.prev }));
        var lo = Math.max(1, page - 4), hi = Math.min(pages, lo + 9);
        for (var i = lo; i <= hi; i++) {
          nav.appendChild(i === page ? el("b", { class: "cur", text: String(i) }) : el("a", { class: "num", href: uiURL(q, i), "data-page": i, text: String(i) }));
          nav.appendChild(document.createTextNode(" "));
        }
        if (page < pages) nav.appendChild(el("a", { class: "next", rel: "next", href: uiURL(q, page + 1), "data-page": page + 1, text: t.next }));
        out.push(nav);
      }
      results.replaceChildren.apply(results, out);
    }

    async function run(q, page, push) {
      var my = ++seq;
      if (push) history.pushState({ q: q, page: page }, "", uiURL(q, page));
      document.title = q + " - " + t.title;
      searching.hidden = false;
      button.disabled = true;
      results.setAttribute("aria-busy", "true");
      try {
        var r = await fetchJSON("/api/search?" + new URLSearchParams({ q: q, page: page }).toString());
        if (my !== seq) return;
        render(q, page, r);
      } catch (err) {
        if (my !== seq) return;
        results.replaceChildren(el("p", { class: "msg err", role: "alert", text: t.error + ": " + err.message }));
      } finally {
        if (my === seq) {
          searching.hidden = true;
          button.disabled = false;
          results.removeAttribute("aria-busy");
        }
      }
    }

    form.addEventListener("submit", function (e) {
      var q = input.value.trim();
      if (!q) return; // let the server show the start page
      e.preventDefault();
      run(q, 1, true);
    });
    results.addEventListener("click", function (e) {
      var a = e.target.closest("nav.pager a");
      if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
      var page = parseInt(a.dataset.page || new URL(a.href).searchParams.get("page") || "1", 10);
      e.preventDefault();
      run(input.value.trim() || new URL(a.href).searchParams.get("q"), page, true);
      window.scrollTo(0, 0);
    });
    window.addEventListener("popstate", function () {
      var p = new URLSearchParams(location.search);
      var q = p.get("q") || "";
      input.value = q;
      if (q) run(q, parseInt(p.get("page") || "1", 10) || 1, false);
      else results.replaceChildren();
    });
  }

  // ---- dashboard ----
  function initDashboard(body) {
    var t = body.dataset;
    var live = document.getElementById("live");
    function set(id, v) { var e = document.getElementById(id); if (e) e.textContent = v; }
    function bytes(b) {
      if (b < 1024) return b + " B";
      var u = "KMGTPE", i = -1;
      do { b /= 1024; i++; } while (b >= 1024 && i < u.length - 1);
      return b.toFixed(1) + " " + u[i] + "iB";
    }

    async function poll() {
      try {
        var both = await Promise.all([fetchJSON("/api/status"), fetchJSON("/api/peers")]);
        var s = both[0], peers = both[1].peers || [];
        set("uptime", Math.round(s.uptime_s));
        set("idle", s.idle ? t.idle : t.busy);
        set("fetch-rate", (s.crawl.FetchRate || 0).toFixed(1));
        set("frontier", s.crawl.Frontier);
        set("fetched", s.crawl.Fetched);
        set("stored", s.crawl.Stored);
        set("outbox", s.outbox);
        set("docs", s.index.Docs);
        set("postings", bytes(s.index.PostingsBytes));
        set("pending", s.index.Pending);
        set("storage", bytes(s.badger_lsm_bytes) + " + " + bytes(s.badger_vlog_bytes));
        set("keyspace", fill(t.keyspace, { prefix: s.key_prefix, owned: s.owned_hosts, known: s.known_hosts }));
        var classes = Object.keys(s.crawl.ErrorsByClass || {}).sort();
        var ec = document.getElementById("error-classes");
        if (classes.length) ec.replaceChildren.apply(ec, classes.map(function (c) { return el("span", { class: "tag", text: c + " " + s.crawl.ErrorsByClass[c] }); }));
        else ec.textContent = t.noerrors;
        set("member-count", peers.length);
        document.getElementById("peers").replaceChildren.apply(document.getElementById("peers"), peers.map(function (p) {
          var id = el("td", {}, [el("code", { title: p.id, text: shortID(p.id) }), p.self ? " (" + t.self + ")" : ""]);
          var tr = el("tr", p.self ? { class: "self" } : {}, [id, el("td", {}, [el("code", { text: p.key_prefix })]),
            el("td", { text: p.load.Pages + " / " + p.load.Frontier + " / " + p.load.Hosts }),
            el("td", { text: (p.search_latency_ms || 0).toFixed(1) + " ms" }), el("td", { text: p.last_seen })]);
          return tr;
        }));
        var errs = (s.recent_errors || []).slice(-20).reverse();
        var ul = document.getElementById("errors");
        if (errs.length) ul.replaceChildren.apply(ul, errs.map(function (e) {
          return el("li", {}, [el("time", { text: new Date(e.at).toTimeString().slice(0, 8) }), " ", el("b", { text: e.where }), " " + e.error]);
        }));
        else ul.replaceChildren(el("li", { class: "none", text: t.noerrors }));
        live.hidden = false;
      } catch (err) {
        live.hidden = true;
      }
      setTimeout(poll, 1000);
    }
    poll();

    var form = document.getElementById("seed-form");
    var result = document.getElementById("seed-result");
    form.addEventListener("submit", async function (e) {
      e.preventDefault();
      var urls = form.querySelector("textarea").value.split(/\s+/).filter(Boolean);
      var button = form.querySelector("button");
      button.disabled = true;
      try {
        var r = await fetchJSON("/api/crawl", { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify({ urls: urls }) });
        var out = [el("p", { class: "msg ok", text: fill(t.accepted, { n: r.accepted }) })];
        if (r.rejected && r.rejected.length) {
          out.push(el("p", { class: "msg warn", text: t.rejected + ":" }));
          out.push(el("ul", { class: "rejected" }, r.rejected.map(function (x) { return el("li", { text: x }); })));
        } else {
          form.querySelector("textarea").value = "";
        }
        result.replaceChildren.apply(result, out);
      } catch (err) {
        result.replaceChildren(el("p", { class: "msg err", role: "alert", text: t.error + ": " + err.message }));
      } finally {
        button.disabled = false;
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var body = document.body;
    if (body.classList.contains("search-page")) initSearch(body);
    if (body.classList.contains("dashboard-page")) initDashboard(body);
  });
})();
