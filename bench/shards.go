package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/eval"
	"sou/index"
	"sou/node"
	"sou/p2p"
	"sou/search"
)

// NodeShards are the index shards of a testnet run kept on disk (`sou
// testnet run --keep --dir DIR`), opened in this process: one index per
// node, each answering for the hosts its node owned (p2p.OwnerOf over the
// run's members), searched through search.Coordinator and the shard wire
// as a node searches its peers. Ranking changes are measured on exactly
// the pages, anchor texts and static ranks that the crawl produced,
// without crawling again. An index built by another analyzer is
// re-indexed by index.Open: work on a copy of the run's directory.
type NodeShards struct {
	members []peer.ID
	dbs     []*badger.DB
	ixs     []*index.Index
}

// OpenNodeShards opens DIR/node-*/db of a kept testnet run with analyzer
// an (nil: the node's).
func OpenNodeShards(dir string, an *index.Analyzer) (*NodeShards, error) {
	nodeDirs, err := filepath.Glob(filepath.Join(dir, "node-*"))
	if err != nil {
		return nil, fmt.Errorf("node shards: %w", err)
	}
	s := &NodeShards{}
	for _, nd := range nodeDirs {
		if fi, err := os.Stat(nd); err != nil || !fi.IsDir() {
			continue
		}
		id, err := peerIDOf(nd)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		db, err := OpenBadger(filepath.Join(nd, "db"))
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		opts := node.IndexOptions()
		opts.Analyzer = an
		ix, err := index.Open(db, opts, slog.New(slog.DiscardHandler))
		if err != nil {
			_ = db.Close()
			_ = s.Close()
			return nil, fmt.Errorf("open index of %s: %w", nd, err)
		}
		s.members = append(s.members, id)
		s.dbs = append(s.dbs, db)
		s.ixs = append(s.ixs, ix)
	}
	if len(s.ixs) == 0 {
		return nil, fmt.Errorf("node shards: no node-*/ directory in %s", dir)
	}
	return s, nil
}

// peerIDOf reads a node's libp2p identity (DIR/identity.key, p2p's format).
func peerIDOf(nodeDir string) (peer.ID, error) {
	raw, err := os.ReadFile(filepath.Join(nodeDir, "identity.key"))
	if err != nil {
		return "", fmt.Errorf("node identity: %w", err)
	}
	k, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return "", fmt.Errorf("node identity of %s: %w", nodeDir, err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("node identity of %s: %w", nodeDir, err)
	}
	return id, nil
}

// Docs is the number of searchable documents each shard holds (replicas
// included).
func (s *NodeShards) Docs() []int64 {
	out := make([]int64, len(s.ixs))
	for i, ix := range s.ixs {
		out[i] = ix.Stats().Docs
	}
	return out
}

// Coordinators returns one coordinator per node, all ranking with p, that
// reach each other through the shard wire in this process.
func (s *NodeShards) Coordinators(p search.Params) []*search.Coordinator {
	t := &shardsTransport{members: s.members, ring: p2p.NewRing(s.members), coords: map[string]*search.Coordinator{}}
	cfg := search.DefaultCoordinatorConfig()
	cfg.Params = p
	cfg.CacheEntries = 0
	out := make([]*search.Coordinator, len(s.ixs))
	for i, ix := range s.ixs {
		self := s.members[i]
		owns := func(host string) bool { return t.ring.Owner(host) == self }
		out[i] = search.NewCoordinator(search.NewLocal(ix, p), &memberTransport{shardsTransport: t, self: self}, cfg, owns)
		t.coords[string(self)] = out[i]
	}
	return out
}

// Searcher returns an eval.Searcher that asks node 0's coordinator, as
// `sou testnet run --qrels` does, with ranking p, for a reader of script
// (search.Request.Script; ScriptUnknown: a reader the engine knows nothing
// of).
func (s *NodeShards) Searcher(p search.Params, script index.Script) eval.Searcher {
	c := s.Coordinators(p)[0]
	return func(ctx context.Context, q string) (eval.Answer, error) {
		resp, err := c.Search(ctx, search.Request{Query: q, N: eval.Cutoff, Timeout: 10 * time.Second, Script: script})
		if errors.Is(err, search.ErrBadRequest) {
			return eval.Answer{}, nil // a query with no search terms finds nothing
		}
		if err != nil {
			return eval.Answer{}, err
		}
		a := eval.Answer{Partial: !resp.Coverage.Complete}
		for _, r := range resp.Results {
			a.URLs = append(a.URLs, r.URL)
		}
		return a, nil
	}
}

// Close closes every index and database.
func (s *NodeShards) Close() error {
	var errs []error
	for i := range s.ixs {
		errs = append(errs, s.ixs[i].Close(), s.dbs[i].Close())
	}
	return errors.Join(errs...)
}

// shardsTransport delivers shard requests to the coordinators in this
// process; it holds hosts as p2p does, by ownership.
type shardsTransport struct {
	members []peer.ID
	ring    *p2p.Ring // of members: who owns what, asked as a node asks its view
	coords  map[string]*search.Coordinator
}

type memberTransport struct {
	*shardsTransport
	self peer.ID
}

func (t *memberTransport) Self() string { return string(t.self) }

func (t *memberTransport) Members() []string {
	out := make([]string, len(t.members))
	for i, m := range t.members {
		out[i] = string(m)
	}
	sort.Strings(out)
	return out
}

func (t *memberTransport) Request(ctx context.Context, member string, req []byte) ([]byte, error) {
	c, ok := t.coords[member]
	if !ok {
		return nil, fmt.Errorf("no member %.20s", member)
	}
	return c.HandleShardRequest(ctx, req)
}

// Holds: a member answers for the hosts it owns.
func (t *memberTransport) Holds(member, host string) bool {
	return string(t.ring.Owner(host)) == member
}

// Diagnosis says why a judged query missed its answer.
type Diagnosis struct {
	// Rank is the first relevant result's rank in the top 1,000 (0: not
	// there).
	Rank int
	// Held says some node holds a relevant page (it was crawled and kept).
	Held bool
	// Missing are the query terms that the best-held relevant page lacks
	// in every field (nil when it has them all).
	Missing []string
}

// Diagnose finds where a query's answer is: its rank among the first
// 1,000 results with ranking p, and which query terms the page lacks.
func (s *NodeShards) Diagnose(ctx context.Context, p search.Params, j eval.Judgment) (Diagnosis, error) {
	var d Diagnosis
	c := s.Coordinators(p)[0]
	rel := map[string]bool{}
	for _, u := range j.Relevant {
		rel[eval.MatchKey(u)] = true
	}
	for page := 1; page <= 10 && d.Rank == 0; page++ {
		resp, err := c.Search(ctx, search.Request{Query: j.Query, Page: page, N: 100, Timeout: 10 * time.Second})
		if err != nil {
			break
		}
		for i, r := range resp.Results {
			if rel[eval.MatchKey(r.URL)] {
				d.Rank = (page-1)*100 + i + 1
				break
			}
		}
		if len(resp.Results) < 100 {
			break
		}
	}
	an := s.ixs[0].Analyzer()
	q, err := search.ParseQuery(j.Query, an)
	if err != nil {
		return d, nil
	}
	best := -1
	for _, ix := range s.ixs {
		for _, u := range j.Relevant {
			rec, err := pageByKey(ctx, ix, u)
			if err != nil || rec == nil {
				continue
			}
			d.Held = true
			have := map[string]bool{}
			texts := append([]string{rec.Title, rec.Body, rec.URL}, rec.Headings...)
			for _, t := range append(texts, rec.Anchors...) {
				for _, tok := range an.Analyze(strings.NewReplacer("/", " ", "?", " ", "=", " ", "&", " ", ":", " ", "#", " ", "%", " ").Replace(t)) {
					have[tok.Term] = true
				}
			}
			var missing []string
			for _, t := range q.Terms() {
				if !have[t] {
					missing = append(missing, t)
				}
			}
			if best < 0 || len(missing) < best {
				best, d.Missing = len(missing), missing
			}
		}
	}
	return d, nil
}

// pageByKey finds the page stored under raw's eval.MatchKey (any query
// string), nil if ix has none.
func pageByKey(ctx context.Context, ix *index.Index, raw string) (*index.PageRecord, error) {
	if rec, err := ix.Get(ctx, raw); err == nil {
		return rec, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil
	}
	want := eval.MatchKey(raw)
	urls, err := ix.HostURLs(ctx, u.Host)
	if err != nil {
		return nil, err
	}
	for _, cand := range urls {
		if eval.MatchKey(cand) == want {
			if rec, err := ix.Get(ctx, cand); err == nil {
				return rec, nil
			}
		}
	}
	return nil, nil
}
