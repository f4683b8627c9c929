package testnet

import (
	"fmt"
	"io"
	"sort"

	"sou/eval"
)

// PrintSummary writes the report for a person.
func PrintSummary(w io.Writer, r *Report) {
	c := r.Crawl
	fmt.Fprintf(w, "testnet: %d node(s), %d hosts, %d pages, seed %d\n", r.Nodes, r.Hosts, r.Pages, r.Seed)
	fmt.Fprintf(w, "crawl:   %d/%d required pages (coverage %.4f) in %.1fs, %.0f pages/s, %d requests\n",
		c.PagesFetched, c.PagesExpected, c.Coverage, c.Seconds, c.PagesPerSecond, c.Requests)
	fmt.Fprintf(w, "         duplicate fetches %d, robots violations %d, politeness violations %d\n",
		c.DuplicateFetches, c.RobotsViolations, c.PolitenessViolations)
	if h := c.CorpusHTML; h != nil {
		fmt.Fprintf(w, "         corpus HTML files fetched %d/%d (%.4f)", h.Fetched, h.Files, h.Coverage)
		for _, host := range sortedHosts(h.BySite) {
			if s := h.BySite[host]; s.Fetched < s.Files {
				fmt.Fprintf(w, "; %s %d/%d", host, s.Fetched, s.Files)
			}
		}
		fmt.Fprintln(w)
	}
	classes := make([]string, 0, len(c.ErrorsByClass))
	for k := range c.ErrorsByClass {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	for _, k := range classes {
		fmt.Fprintf(w, "         %-20s %d\n", k, c.ErrorsByClass[k])
	}
	if n := r.Network; n != nil && r.Nodes > 1 {
		fmt.Fprintf(w, "network: members seen %v, %d URLs forwarded, %.1f bytes/URL, max hops %d, handoff pages %d\n",
			n.MembersSeenByEach, n.URLsForwarded, n.BytesPerURL, n.ForwardHopsMax, n.HandoffPages)
		fmt.Fprintf(w, "         owner spread (most loaded over mean): hosts %.2f, required pages %.2f (no split by host below %.2f)\n",
			n.OwnerSpread, n.OwnerSpreadPages, n.OwnerSpreadPagesFloor)
	}
	if s := r.Search; s != nil {
		fmt.Fprintf(w, "search:  %d queries, p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, coverage min %.2f, rank consistent %v, zero-result %d\n",
			s.Queries, s.P50MS, s.P95MS, s.P99MS, s.CoverageMin, s.RankConsistent, s.ZeroResults)
		for _, q := range s.Slowest {
			fmt.Fprintf(w, "slow:    %.1f ms %q at node %d (coordinator %.1f ms, slowest shard %.1f ms, %d hits, cached %v)\n",
				q.MS, q.Query, q.Node, q.CoordinatorMS, q.ShardMS, q.Total, q.Cached)
		}
	}
	if s := r.Search; s != nil {
		if len(s.Qrels) > 0 {
			var rows []eval.Score
			for _, q := range s.Qrels {
				rows = append(rows, q.Parts...)
				rows = append(rows, q.Score)
			}
			fmt.Fprintf(w, "quality: judged queries, split %s:\n", s.QrelsSplit)
			_ = eval.WriteTable(w, rows)
		}
		if k := s.AfterKill; k != nil {
			fmt.Fprintf(w, "kill:    node %d killed after the crawl: partial coverage reported %v, max latency %.1f ms, late %d, top 10 unchanged after takeover %v (%d of %d changed)\n",
				k.Killed, k.PartialReported, k.MaxLatencyMS, k.Late, k.SameTop10, k.Changed, k.Queries)
		}
	}
	if h := r.Hostile; h != nil {
		fmt.Fprintf(w, "hostile: %d attackers (%d joined), %d forged pages, %d served by honest nodes, %d phantom members, %d honest crashes, honest RSS peaks %v MB, %d honest hosts\n",
			h.Attackers, h.AttackersJoined, h.ForgedURLs, h.PoisonedPages, h.PhantomMembers, h.HonestCrashes, h.HonestRSSPeakMB, h.HonestHosts)
		names := make([]string, 0, len(h.Attacks))
		for k := range h.Attacks {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(w, "attack:  %-15s tried %d, refused %d\n", k, h.Attacks[k].Tried, h.Attacks[k].Refused)
		}
	}
	for _, n := range r.PerNode {
		fmt.Fprintf(w, "node %d:  %s: %d hosts, %d pages stored; owns %d hosts, %d required pages by the truth; %d web requests",
			n.Node, n.Peer, n.HostsOwned, n.PagesStored, n.TruthHosts, n.TruthPages, n.WebRequests)
		if n.CPUSeconds > 0 || n.RSSAnonPeakMB > 0 {
			fmt.Fprintf(w, "; %.1f CPU-s, RSS peak anon %.0f MB, file %.0f MB", n.CPUSeconds, n.RSSAnonPeakMB, n.RSSFilePeakMB)
		}
		fmt.Fprintln(w)
	}
	for _, e := range r.Events {
		fmt.Fprintf(w, "event:   %s\n", e)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAIL:    %s\n", f)
	}
	fmt.Fprintf(w, "ok: %v\n", r.OK)
}
