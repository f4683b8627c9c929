package node

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sou/crawl"
	"sou/search"
)

// metrics is the node's Prometheus registry (one per node, not the global
// default, so tests can run several nodes in one process).
type metrics struct {
	reg           *prometheus.Registry
	forwarded     prometheus.Counter
	storedPages   *prometheus.CounterVec
	searchLatency prometheus.Histogram
	shardOutcomes *prometheus.CounterVec
}

func newMetrics(n *Node) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sou_urls_forwarded_total", Help: "URLs handed to the p2p outbox for other owners.",
		}),
		storedPages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sou_pages_processed_total", Help: "Fetched pages processed, by outcome.",
		}, []string{"outcome"}),
		searchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sou_search_seconds", Help: "Coordinator search latency.",
			Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5},
		}),
		shardOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sou_search_shards_total", Help: "Shard answers seen by this coordinator, by state (answered, timeout, failed).",
		}, []string{"state"}),
	}
	m.reg.MustRegister(m.forwarded, m.storedPages, m.searchLatency, m.shardOutcomes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&statsCollector{n: n})
	return m
}

func (m *metrics) observeFetch(p *crawl.Page) {
	outcome := "indexed"
	switch {
	case p.Status != http.StatusOK:
		outcome = "status_" + crawl.StatusClass(p.Status)
	case p.NoIndex:
		outcome = "noindex"
	case p.DuplicateOf != "":
		outcome = "duplicate"
	}
	m.storedPages.WithLabelValues(outcome).Inc()
}

func (m *metrics) observeSearch(r *search.Response) {
	m.searchLatency.Observe(r.ElapsedMS / 1000)
	if r.Cached {
		return
	}
	for _, s := range r.Coverage.Shards {
		m.shardOutcomes.WithLabelValues(s.State).Inc()
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// statsCollector reads the components' own counters at scrape time, so the
// figures are never stale and nothing is counted twice.
type statsCollector struct{ n *Node }

var (
	descFrontier   = prometheus.NewDesc("sou_frontier_urls", "URLs waiting in the frontier.", nil, nil)
	descFetches    = prometheus.NewDesc("sou_fetches_total", "Fetches by outcome class.", []string{"class"}, nil)
	descFetched    = prometheus.NewDesc("sou_fetched_total", "Fetches completed.", nil, nil)
	descDocs       = prometheus.NewDesc("sou_index_documents", "Documents in the local index.", nil, nil)
	descOutbox     = prometheus.NewDesc("sou_outbox_urls", "URLs waiting in the p2p outboxes.", nil, nil)
	descMembers    = prometheus.NewDesc("sou_members", "Live members seen by this node.", nil, nil)
	descBadgerSize = prometheus.NewDesc("sou_badger_bytes", "Badger size on disk.", []string{"part"}, nil)
)

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFrontier, descFetches, descFetched, descDocs, descOutbox, descMembers, descBadgerSize} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	cs := c.n.crawler.Stats()
	ch <- prometheus.MustNewConstMetric(descFrontier, prometheus.GaugeValue, float64(cs.Frontier))
	ch <- prometheus.MustNewConstMetric(descFetched, prometheus.CounterValue, float64(cs.Fetched))
	for class, v := range cs.ErrorsByClass {
		ch <- prometheus.MustNewConstMetric(descFetches, prometheus.CounterValue, float64(v), class)
	}
	ch <- prometheus.MustNewConstMetric(descDocs, prometheus.GaugeValue, float64(c.n.ix.Stats().Docs))
	ch <- prometheus.MustNewConstMetric(descOutbox, prometheus.GaugeValue, float64(c.n.net.OutboxDepth()))
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(len(c.n.net.Members())))
	lsm, vlog := c.n.dbSize()
	ch <- prometheus.MustNewConstMetric(descBadgerSize, prometheus.GaugeValue, float64(lsm), "lsm")
	ch <- prometheus.MustNewConstMetric(descBadgerSize, prometheus.GaugeValue, float64(vlog), "vlog")
}
