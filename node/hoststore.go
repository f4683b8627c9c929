package node

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
	"sou/placement"
)

// hostData is what this node holds of hosts: the index's pages, the
// crawler's state, and these Badger keys:
//
//   - "n:m/<peer ID>": a member of the view (placement.Saved.Members).
//   - "n:founder/<peer ID>": a founder (placement.Saved.Founders).
//   - "n:h/<host>" -> role byte: placement.Saved.Hosts ("n:r/<host>",
//     a replica host of an earlier version, is read as Replica).
//   - "n:f/<host>\x00<url>": a URL the host's owner settled without a
//     page (fetch marker); "n:s/<host>\x00<sitemap url>" -> a sitemap its
//     owner read (peermsg.EncodeSitemap); "n:u/<host>\x00<url>": a URL
//     queued at the owner that no page it stored tells of (one members
//     sent it, a link of a page it did not index, a redirect's target, a
//     link a script names), not fetched yet; replicated before the call
//     that queued it returns. A replica keeps them for a takeover; the
//     owner keeps its own too, so that it can take the host over again
//     after handing it back, and answer pulls. A page or marker stored
//     deletes the URL's queued key; forgetting a host deletes its queued
//     keys.
type hostData struct {
	db      *badger.DB
	ix      *index.Index
	crawler *crawl.Crawler
	log     *slog.Logger
	// indexing serializes indexing held pages: a takeover and
	// indexOwned would otherwise both analyse a host's pages.
	indexing sync.Mutex
	// kept holds the URLs keepQueued wrote and replicated (keptqueued.go).
	kept keptQueued
}

const (
	prefixMember        = "n:m/"
	prefixFounder       = "n:founder/"
	prefixHostRole      = "n:h/"
	prefixLegacyReplica = "n:r/"
	prefixFetchedMarker = "n:f/"
	prefixSitemap       = "n:s/"
	prefixQueued        = "n:u/"
)

// Handoff and replication payloads: peermsg's bounded, versioned codecs;
// p2p caps their size, and one that does not decode is malformed (refused,
// counted, its sender throttled).
const (
	topicHandoffPages = "handoff-pages/1"
	topicHandoffHost  = "handoff-host/1"
	topicReplica      = "replica/2"
	topicManifest     = "handoff-manifest/1"
	topicHint         = "replica-hint/1"
	topicReplicaPull  = "replica-pull/1"
	pagesPerMessage   = 32
	// bytesPerMessage keeps a batch of pages well under p2p's message cap.
	bytesPerMessage = 2 << 20
	// pullTimeout bounds one member's answer to a pull. A takeover waits
	// for it, so it is short; a longer answer (a whole host for a new
	// owner that holds nothing of it) is cut, and what did not arrive is
	// fetched again.
	pullTimeout = 10 * time.Second
)

func hostKey(prefix, host, u string) []byte { return []byte(prefix + host + "\x00" + u) }

// saved reads what placement kept from the last run.
func (s *hostData) saved() (placement.Saved, error) {
	out := placement.Saved{Hosts: map[string]placement.Role{}}
	err := s.db.View(func(txn *badger.Txn) error {
		for _, prefix := range []string{prefixMember, prefixFounder, prefixLegacyReplica, prefixHostRole} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
			for it.Rewind(); it.Valid(); it.Next() {
				key := string(it.Item().Key()[len(prefix):])
				switch prefix {
				case prefixMember:
					if id, err := peer.Decode(key); err == nil {
						out.Members = append(out.Members, id)
					}
				case prefixFounder:
					if id, err := peer.Decode(key); err == nil {
						out.Founders = append(out.Founders, id)
					}
				case prefixLegacyReplica:
					out.Hosts[key] = placement.Replica
				default:
					_ = it.Item().Value(func(v []byte) error {
						if len(v) == 1 {
							out.Hosts[key] = placement.Role(v[0])
						}
						return nil
					})
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("read placement state: %w", err)
	}
	return out, nil
}

// save keeps one change of placement.Saved.
func (s *hostData) save(a placement.Action) error {
	err := s.db.Update(func(txn *badger.Txn) error {
		switch a := a.(type) {
		case placement.SaveMember:
			if a.In {
				return txn.Set([]byte(prefixMember+a.Peer.String()), nil)
			}
			return txn.Delete([]byte(prefixMember + a.Peer.String()))
		case placement.SaveFounder:
			return txn.Set([]byte(prefixFounder+a.Peer.String()), nil)
		case placement.SaveHost:
			if err := txn.Delete([]byte(prefixLegacyReplica + a.Host)); err != nil {
				return err
			}
			if a.Role == placement.None {
				return txn.Delete([]byte(prefixHostRole + a.Host))
			}
			return txn.Set([]byte(prefixHostRole+a.Host), []byte{byte(a.Role)})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save %T: %w", a, err)
	}
	return nil
}

func (s *hostData) crawlerHosts(ctx context.Context) ([]string, error) {
	return s.crawler.Hosts(ctx)
}

// hostKeys returns the URLs of host's keys under prefix ("n:f/", "n:s/",
// "n:u/").
func (s *hostData) hostKeys(prefix, host string) ([]string, error) {
	p := []byte(prefix + host + "\x00")
	var urls []string
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			urls = append(urls, string(it.Item().Key()[len(p):]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s keys of %s: %w", prefix, host, err)
	}
	return urls, nil
}

// deleteHostKeys deletes host's keys under prefix.
func (s *hostData) deleteHostKeys(prefix, host string) error {
	urls, err := s.hostKeys(prefix, host)
	if err != nil || len(urls) == 0 {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, u := range urls {
		if err := wb.Delete(hostKey(prefix, host, u)); err != nil {
			return fmt.Errorf("delete %s keys of %s: %w", prefix, host, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("delete %s keys of %s: %w", prefix, host, err)
	}
	return nil
}

// keep writes the markers, sitemaps and queued URLs of items (under this
// node's keys) and deletes the queued keys of the URLs settled now. A
// peer's payload may carry far more keys than one Badger transaction
// takes, so they are written in as many as needed (splitTxn); each write
// is correct alone, and an error or a crash between commits leaves a
// prefix of them written, which a retry completes.
func (s *hostData) keep(markers []peermsg.Fetched, maps []peermsg.Sitemap, queued []peermsg.Fetched, settled []peermsg.Fetched) error {
	if len(markers)+len(maps)+len(queued)+len(settled) == 0 {
		return nil
	}
	err := func() error {
		w := newSplitTxn(s.db)
		defer w.discard()
		for _, m := range markers {
			k := hostKey(prefixFetchedMarker, m.Host, m.URL)
			if err := w.do(func(txn *badger.Txn) error { return txn.Set(k, nil) }); err != nil {
				return err
			}
		}
		for _, sm := range maps {
			k, v := hostKey(prefixSitemap, sm.Host, sm.URL), peermsg.EncodeSitemap(sm)
			if err := w.do(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
				return err
			}
		}
		for _, q := range queued {
			k := hostKey(prefixQueued, q.Host, q.URL)
			if err := w.do(func(txn *badger.Txn) error { return txn.Set(k, nil) }); err != nil {
				return err
			}
		}
		for _, f := range settled {
			k := hostKey(prefixQueued, f.Host, f.URL)
			err := w.do(func(txn *badger.Txn) error {
				if _, err := txn.Get(k); errors.Is(err, badger.ErrKeyNotFound) {
					return nil
				} else if err != nil {
					return err
				}
				return txn.Delete(k)
			})
			if err != nil {
				return err
			}
		}
		return w.commit()
	}()
	if err != nil {
		return fmt.Errorf("keep %d markers, %d sitemaps, %d queued URLs: %w", len(markers), len(maps), len(queued), err)
	}
	return nil
}

// splitTxn writes through one Badger transaction at a time: when a write
// does not fit in the current one (badger.ErrTxnTooBig), it commits that
// and makes the write in a new one. Only for writes that are each correct
// on their own, since a failure leaves the earlier transactions committed.
type splitTxn struct {
	db  *badger.DB
	txn *badger.Txn
}

func newSplitTxn(db *badger.DB) *splitTxn {
	return &splitTxn{db: db, txn: db.NewTransaction(true)}
}

// do runs write in the current transaction, or in a new one after
// committing the current one if it does not fit.
func (w *splitTxn) do(write func(*badger.Txn) error) error {
	err := write(w.txn)
	if !errors.Is(err, badger.ErrTxnTooBig) {
		return err
	}
	if err := w.txn.Commit(); err != nil {
		return err
	}
	w.txn = w.db.NewTransaction(true)
	return write(w.txn)
}

func (w *splitTxn) commit() error { return w.txn.Commit() }

func (w *splitTxn) discard() { w.txn.Discard() }

// docBytes estimates a document's size on the wire.
func docBytes(d *index.Document) int {
	n := len(d.URL) + len(d.Title) + len(d.Body) + len(d.Raw) + 256
	for _, h := range d.Headings {
		n += len(h)
	}
	return n
}

// wireDoc returns d with its raw bytes cut to what one message may carry
// (the text and postings travel whole).
func wireDoc(d *index.Document) *index.Document {
	if len(d.Raw) <= peermsg.MaxRawBytes {
		return d
	}
	cp := *d
	cp.Raw = cp.Raw[:peermsg.MaxRawBytes]
	return &cp
}

func docFromRecord(r *index.PageRecord) *index.Document {
	d := r.Document
	return &d
}

// handOff moves one host to its new owner: stored pages and the URLs
// queued for it first (the new owner re-indexes them), then the crawl
// state (frontier, URL-seen, host state), then the crawler drops the
// host. Pages stay until placement says whether to forget them.
func (s *hostData) handOff(ctx context.Context, net messenger, host string, to peer.ID) (int, error) {
	send := func(topic string, payload []byte) error {
		ctx, cancel := context.WithTimeout(ctx, messageTimeout)
		defer cancel()
		return net.Send(ctx, to, topic, payload)
	}
	var batch []*index.Document
	anchors := map[string][]string{}
	sent, size := 0, 0
	flush := func(queued []peermsg.Fetched) error {
		if len(batch) == 0 && len(queued) == 0 {
			return nil
		}
		b, err := peermsg.EncodePages(&peermsg.Pages{Docs: batch, Anchors: anchors, Queued: queued})
		if err != nil {
			return err
		}
		if err := send(topicHandoffPages, b); err != nil {
			return fmt.Errorf("send %d pages: %w", len(batch), err)
		}
		sent += len(batch)
		batch, size = batch[:0], 0
		anchors = map[string][]string{}
		return nil
	}
	err := s.ix.ForEachPage(ctx, host, func(r *index.PageRecord) error {
		d := wireDoc(docFromRecord(r))
		if len(batch) > 0 && (len(batch) >= pagesPerMessage || size+docBytes(d) > bytesPerMessage) {
			if err := flush(nil); err != nil {
				return err
			}
		}
		batch = append(batch, d)
		size += docBytes(d)
		if len(r.Anchors) > 0 {
			anchors[r.URL] = r.Anchors
		}
		return nil
	})
	if err != nil {
		return sent, err
	}
	queued, err := s.hostKeys(prefixQueued, host)
	if err != nil {
		return sent, err
	}
	if err := flush(fetchedOf(host, queued)); err != nil {
		return sent, err
	}
	exp, err := s.crawler.ExportHost(ctx, host)
	if err != nil {
		return sent, fmt.Errorf("export crawl state: %w", err)
	}
	for _, part := range splitExport(exp, bytesPerMessage) {
		if err := send(topicHandoffHost, peermsg.EncodeHostState(part)); err != nil {
			return sent, fmt.Errorf("send crawl state: %w", err)
		}
	}
	if err := s.crawler.DropHost(ctx, host); err != nil {
		return sent, fmt.Errorf("drop crawl state: %w", err)
	}
	return sent, nil
}

func fetchedOf(host string, urls []string) []peermsg.Fetched {
	out := make([]peermsg.Fetched, len(urls))
	for i, u := range urls {
		out[i] = peermsg.Fetched{Host: host, URL: u}
	}
	return out
}

// abandon gives up the crawl state of a host this node does not hand
// off (its owner refused it for HandoffGiveUp, or this node never crawled
// it): the URLs still queued for it go to the owner as links, and the
// crawler drops the host.
func (s *hostData) abandon(ctx context.Context, net messenger, host string, refused bool) error {
	queued, err := s.hostKeys(prefixQueued, host)
	if err != nil {
		return err
	}
	exp, err := s.crawler.ExportHost(ctx, host)
	if err != nil {
		return fmt.Errorf("export %s: %w", host, err)
	}
	// The crawler's queue holds what members sent (queued) and the links
	// this node found to a host it owned by p2p's view.
	seen := map[string]bool{}
	var recs []p2p.URLRecord
	for _, d := range exp.Queued() {
		seen[d.URL] = true
		recs = append(recs, p2p.URLRecord{URL: d.URL, Cash: d.Cash, Depth: d.Depth})
	}
	for _, u := range queued {
		if !seen[u] {
			recs = append(recs, p2p.URLRecord{URL: u})
		}
	}
	// An owner that refused the handoff may know nothing of the host: with
	// nothing queued it would never crawl or take it over. One URL it
	// knows tells it, and its takeover pulls the pages from their holders
	// (this node keeps them for that pull).
	if refused && len(recs) == 0 {
		if u := exp.KnownURL(); u != "" {
			recs = append(recs, p2p.URLRecord{URL: u})
		}
	}
	if err := net.Forward(ctx, recs); err != nil && !errors.Is(err, p2p.ErrInvalidRecord) {
		return fmt.Errorf("forward the queued URLs of %s: %w", host, err)
	}
	if err := s.crawler.DropHost(ctx, host); err != nil {
		return fmt.Errorf("drop crawl state of %s: %w", host, err)
	}
	return nil
}

// indexOwned indexes the pages this node holds unindexed as a replica
// (index.HoldStoredBatch) of every host that owns says it owns now. Search asks
// a member for the hosts it owns by its view, so this follows the view
// rather than waiting for placement's takeover.
func (s *hostData) indexOwned(ctx context.Context, owns func(host string) bool) error {
	for host := range s.ix.Held() {
		if !owns(host) {
			continue
		}
		n, err := s.indexHeld(ctx, host)
		if err != nil {
			return err
		}
		s.log.Info("indexed the held pages of a host now owned", "host", host, "pages", n)
	}
	return nil
}

func (s *hostData) indexHeld(ctx context.Context, host string) (int, error) {
	s.indexing.Lock()
	defer s.indexing.Unlock()
	n, err := s.ix.IndexHeld(ctx, host)
	if err != nil {
		return n, fmt.Errorf("index held pages of %s: %w", host, err)
	}
	return n, nil
}

// forget deletes the pages and queued URLs of a host this node no longer
// holds.
func (s *hostData) forget(ctx context.Context, host string) error {
	urls, err := s.ix.HostURLs(ctx, host)
	if err != nil {
		return err
	}
	for _, u := range urls {
		if err := s.ix.Delete(ctx, u); err != nil {
			return fmt.Errorf("delete handed-off page %s: %w", u, err)
		}
	}
	// Before, so that no keepQueued that wrote a key the deletion may
	// remove marks it kept; after, so that none that began in between does.
	s.kept.reset()
	defer s.kept.reset()
	return s.deleteHostKeys(prefixQueued, host)
}

// splitExport cuts a host's crawl state into parts of about maxBytes of URL
// records each; the first carries the host and robots records. Importing
// the parts one after the other merges them (crawl.ImportHost).
func splitExport(e *crawl.HostExport, maxBytes int) []*crawl.HostExport {
	first := &crawl.HostExport{Host: e.Host, State: e.State, Robots: e.Robots}
	parts := []*crawl.HostExport{first}
	cur, size := first, len(e.State)+len(e.Robots)
	for _, u := range e.URLs {
		if size+len(u) > maxBytes && len(cur.URLs) > 0 {
			cur = &crawl.HostExport{Host: e.Host}
			parts = append(parts, cur)
			size = 0
		}
		cur.URLs = append(cur.URLs, u)
		size += len(u) + 4
	}
	return parts
}

func urlHash(u string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(u))
	return h.Sum64()
}

// pull asks each of from for what it holds of host and this node does
// not, and returns once each answered or pullTimeout passed. The request
// carries a 64-bit FNV-1a hash of every URL held here (pages, fetch
// markers, sitemap reads); each asked member answers with replica
// messages for the URLs not among them, and the URLs queued for the host,
// stored here before it acknowledges the request. A member that does not
// answer costs refetches, not the takeover.
func (s *hostData) pull(ctx context.Context, net messenger, host string, from []peer.ID) error {
	if len(from) == 0 {
		return nil
	}
	urls, err := s.ix.HostURLs(ctx, host)
	if err != nil {
		return fmt.Errorf("pages of %s: %w", host, err)
	}
	for _, prefix := range []string{prefixFetchedMarker, prefixSitemap} {
		keys, err := s.hostKeys(prefix, host)
		if err != nil {
			return err
		}
		urls = append(urls, keys...)
	}
	// A host larger than a request's hashes sends the first ones and gets
	// some pages it holds again (storing a page twice is harmless).
	have := make([]uint64, 0, min(len(urls), peermsg.MaxPullHave))
	for _, u := range urls[:min(len(urls), peermsg.MaxPullHave)] {
		have = append(have, urlHash(u))
	}
	b := peermsg.EncodePull(peermsg.Pull{Host: host, Have: have})
	var wg sync.WaitGroup
	for _, p := range from {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, pullTimeout)
			defer cancel()
			if err := net.Send(ctx, p, topicReplicaPull, b); err != nil && ctx.Err() == nil {
				s.log.Debug("pull failed; what only that member holds may be fetched again", "host", host, "peer", p, "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}

// answerPull sends a puller what this node holds of host and the puller
// does not (by the hashes it holds), and every URL queued for host, as
// replica messages stored there before this returns.
func (s *hostData) answerPull(ctx context.Context, net messenger, to peer.ID, m peermsg.Pull) (int, error) {
	have := make(map[uint64]struct{}, len(m.Have))
	for _, h := range m.Have {
		have[h] = struct{}{}
	}
	missing := func(u string) bool { _, ok := have[urlHash(u)]; return !ok }
	var msg peermsg.Pages
	sent := 0
	send := func() error {
		if len(msg.Docs)+len(msg.Fetched)+len(msg.Sitemaps)+len(msg.Queued)+len(msg.Anchors) == 0 {
			return nil
		}
		b, err := peermsg.EncodePages(&msg)
		if err != nil {
			return err
		}
		if err := net.Send(ctx, to, topicReplica, b); err != nil {
			return err
		}
		sent += len(msg.Docs) + len(msg.Fetched) + len(msg.Sitemaps) + len(msg.Queued)
		msg = peermsg.Pages{}
		return nil
	}
	markers, err := s.hostKeys(prefixFetchedMarker, m.Host)
	if err != nil {
		return 0, err
	}
	for _, u := range markers {
		if missing(u) {
			msg.Fetched = append(msg.Fetched, peermsg.Fetched{Host: m.Host, URL: u})
		}
	}
	if msg.Sitemaps, err = s.sitemaps(m.Host, missing); err != nil {
		return 0, err
	}
	queued, err := s.hostKeys(prefixQueued, m.Host)
	if err != nil {
		return 0, err
	}
	msg.Queued = fetchedOf(m.Host, queued[:min(len(queued), peermsg.MaxMarkers)])
	// The URLs first: the puller usually lacks few of the pages, and only
	// those are read whole.
	urls, err := s.ix.HostURLs(ctx, m.Host)
	if err != nil {
		return 0, err
	}
	for _, u := range urls {
		if !missing(u) {
			continue
		}
		r, err := s.ix.Get(ctx, u)
		if errors.Is(err, index.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return sent, err
		}
		msg.Docs = append(msg.Docs, wireDoc(docFromRecord(r)))
		if len(r.Anchors) > 0 {
			if msg.Anchors == nil {
				msg.Anchors = map[string][]string{}
			}
			msg.Anchors[r.URL] = r.Anchors
		}
		if len(msg.Docs) >= pagesPerMessage {
			if err := send(); err != nil {
				return sent, err
			}
		}
	}
	return sent, send()
}

// sitemaps returns the sitemap reads of host kept here whose URL missing
// says the puller lacks (all of them for a nil missing).
func (s *hostData) sitemaps(host string, missing func(string) bool) ([]peermsg.Sitemap, error) {
	prefix := []byte(prefixSitemap + host + "\x00")
	var out []peermsg.Sitemap
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if missing != nil && !missing(string(it.Item().Key()[len(prefix):])) {
				continue
			}
			var sm peermsg.Sitemap
			if err := it.Item().Value(func(v []byte) (err error) { sm, err = peermsg.DecodeSitemap(v); return err }); err != nil {
				continue // a bad record costs a sitemap read, nothing else
			}
			out = append(out, sm)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sitemaps of %s: %w", host, err)
	}
	return out, nil
}

// takeOver makes a host held here this node's to crawl: its stored pages
// and fetch markers are marked fetched and the frontier is rebuilt from
// the pages' links, the URLs members sent its owner and the sitemaps its
// owner read, so the crawl carries on here without fetching again what
// was fetched. Links to other hosts are routed again, which also recovers
// what was in a dead owner's outbox.
func (s *hostData) takeOver(ctx context.Context, net messenger, host string) error {
	if _, err := s.indexHeld(ctx, host); err != nil {
		return err
	}
	var urls []string
	var links []crawl.Discovered
	linksOf := map[string][]crawl.Discovered{} // page URL -> its links
	err := s.ix.ForEachPage(ctx, host, func(r *index.PageRecord) error {
		urls = append(urls, r.URL)
		u, err := url.Parse(r.URL)
		if err != nil {
			return nil
		}
		parsed, err := crawl.ParseHTML(r.Raw, r.ContentType, r.Header, u)
		if err != nil || parsed.NoFollow {
			return nil
		}
		for _, l := range parsed.Links {
			if !l.NoFollow {
				linksOf[r.URL] = append(linksOf[r.URL], crawl.Discovered{URL: l.URL, Anchor: l.Anchor, SourceHost: host, Base: l.Base})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	depths := heldDepths(host, urls, linksOf)
	for page, ls := range linksOf {
		for _, l := range ls {
			l.Depth = depths[page] + 1
			links = append(links, l)
		}
	}
	markers, err := s.hostKeys(prefixFetchedMarker, host)
	if err != nil {
		return err
	}
	urls = append(urls, markers...)
	if err := s.crawler.MarkFetched(ctx, urls); err != nil {
		return err
	}
	queued, err := s.hostKeys(prefixQueued, host)
	if err != nil {
		return err
	}
	for _, u := range queued {
		links = append(links, crawl.Discovered{URL: u, Depth: 1})
	}
	// The sitemaps the old owner read: their URLs join the frontier (those
	// already fetched are known by now) and they are not read again;
	// sitemaps it had not read yet are.
	maps, err := s.sitemaps(host, nil)
	if err != nil {
		return err
	}
	read, children := []string{}, map[string]bool{}
	for _, sm := range maps {
		read = append(read, sm.URL)
		for _, u := range sm.Listed {
			links = append(links, crawl.Discovered{URL: u, SourceHost: host, Depth: 1})
		}
		for _, c := range sm.Children {
			children[c] = true
		}
	}
	var pending []string
	for c := range children {
		if !contains(read, c) {
			pending = append(pending, c)
		}
	}
	if err := s.crawler.NoteSitemaps(ctx, host, read, pending); err != nil {
		return err
	}
	var local []crawl.Discovered
	var remote []p2p.URLRecord
	for _, l := range links {
		if h := crawl.HostKeyOf(l.URL); h != "" && net.IsOwner(h) {
			local = append(local, l)
		} else {
			remote = append(remote, p2p.URLRecord{URL: l.URL, Anchor: l.Anchor, SourceHost: l.SourceHost, Depth: l.Depth})
		}
	}
	if err := s.crawler.Add(ctx, local); err != nil {
		return err
	}
	if len(remote) > 0 {
		if err := net.Forward(ctx, remote); err != nil && !errors.Is(err, p2p.ErrInvalidRecord) {
			return err
		}
	}
	s.log.Info("took over host", "host", host, "pages", len(urls), "links", len(links))
	return nil
}

// heldDepths estimates the link depth of the pages of a host taken over,
// which the old owner's crawler knew and did not replicate. The depth
// bound (crawl.FilterConfig.MaxDepth) is what ends an endless site (a
// calendar's months link on forever), so links found in the pages must
// not start again at depth 1: the new owner would crawl the trap that far
// again past where the old owner stopped, and its pages would change the
// statistics every score uses. A page's depth is its distance, over the
// links between the held pages, from the host's root at depth 1, or from
// a page no held page links to (entered from elsewhere) at depth 1; a
// page reached only through a cycle entered from elsewhere is at depth 1.
// When the root's own depth was 0 or 1, as for a seed or a page a seed
// links to, the pages at the old owner's last depth get the depth they
// had or one more, and their links are refused again as the old owner
// refused them.
func heldDepths(host string, pages []string, linksOf map[string][]crawl.Discovered) map[string]int {
	depth := make(map[string]int, len(pages))
	linked := map[string]bool{}
	for _, ls := range linksOf {
		for _, l := range ls {
			linked[l.URL] = true
		}
	}
	var queue []string
	start := func(u string) {
		if _, seen := depth[u]; !seen {
			depth[u] = 1
			queue = append(queue, u)
		}
	}
	held := make(map[string]bool, len(pages))
	for _, p := range pages {
		held[p] = true
	}
	bfs := func() {
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, l := range linksOf[p] {
				if _, seen := depth[l.URL]; !seen && held[l.URL] {
					depth[l.URL] = depth[p] + 1
					queue = append(queue, l.URL)
				}
			}
		}
	}
	for _, root := range []string{"http://" + host + "/", "https://" + host + "/"} {
		if held[root] {
			start(root)
		}
	}
	for _, p := range pages {
		if !linked[p] {
			start(p)
		}
	}
	bfs()
	for _, p := range pages {
		start(p)
		bfs()
	}
	return depth
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
