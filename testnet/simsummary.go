package testnet

import (
	"fmt"
	"io"
)

// PrintSimSummary writes the sim section for a person (after
// PrintSummary of the rest of the report).
func PrintSimSummary(w io.Writer, s *SimSection) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "sim:     %d nodes (%d at the end, %d joins, %d leaves), latency %g..%g ms, loss %g%%, bandwidth %.0f bit/s per link, %d workers per node; up in %.1fs\n",
		s.Nodes, s.NodesAtEnd, s.Joins, s.Leaves, s.LatencyMS[0], s.LatencyMS[1], s.LossPercent, s.BandwidthBitsS, s.WorkersPerNode, s.StartupSeconds)
	fmt.Fprintf(w, "         crawl %.1f pages/s (%.2f per node); CPU %.1fs (%.2fs per 1000 pages)\n",
		s.CrawlPagesPerSecond, s.CrawlPagesPerSecondPerNode, s.Resources.CPUSeconds, s.Resources.CPUSecondsPerKPage)
	r := s.Resources
	fmt.Fprintf(w, "         peak RSS %.0f MB, heap %.0f MB, %d goroutines; per node %.1f MB RSS, %.1f MB heap, %.0f goroutines, %.0f documents, %.0f KB postings\n",
		r.PeakRSSMB, r.PeakHeapMB, r.PeakGoroutines, r.RSSPerNodeMB, r.HeapPerNodeMB, r.GoroutinesPerNode, r.DocsPerNodeAvg, r.PostingsBytesPerNodeAvg/1024)
	c := s.Coordination
	fmt.Fprintf(w, "         coordination %.1f messages and %.0f bytes per page (%d messages, %d bytes); %d membership messages dropped by gossipsub\n", c.MessagesPerPage, c.BytesPerPage, c.Messages, c.Bytes, c.GossipDrops)
	for _, name := range trafficClasses {
		if t, ok := c.ByProtocol[name]; ok && t.Bytes > 0 {
			fmt.Fprintf(w, "           %-8s %8d streams %8d messages %9d writes %12d bytes\n", name, t.Streams, t.Messages, t.Writes, t.Bytes)
		}
	}
	o := s.OwnerLookup
	fmt.Fprintf(w, "         owner lookup: %d URLs forwarded, %d re-forwarded, %d dropped, mean %.3f hops, max %d\n", o.URLsForwarded, o.URLsReforwarded, o.URLsDropped, o.MeanHops, o.MaxHops)
	if q := s.Query; q != nil {
		fmt.Fprintf(w, "         query fan-out: %d searches, %.1f shard requests, %.1f messages and %.0f bytes per query, max %.1f ms\n",
			q.Searches, q.ShardRequestsPerQ, q.MessagesPerQuery, q.BytesPerQuery, q.MaxMS)
	}
}
