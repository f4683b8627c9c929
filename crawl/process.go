package crawl

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/s2"
)

// procEntry is a fetched response waiting for the processing stage
// ("c:p/<seq>"). It is written in the same transaction that marks the URL
// fetched, and deleted in the same transaction that enqueues its local links.
type procEntry struct {
	URL         string      `json:"u"`
	Host        string      `json:"h"`
	Status      int         `json:"s"`
	Header      http.Header `json:"hd,omitempty"`
	ContentType string      `json:"ct,omitempty"`
	Truncated   bool        `json:"tr,omitempty"`
	Location    string      `json:"l,omitempty"`
	FetchedAt   int64       `json:"f"`
	Cash        float64     `json:"c,omitempty"` // to distribute over the out-links
	History     float64     `json:"hi,omitempty"`
	Depth       int         `json:"d,omitempty"`
	PrevHash    []byte      `json:"ph,omitempty"` // previous visit (recrawl change detection)
	PrevSim     uint64      `json:"ps,omitempty"`
	Base        string      `json:"b,omitempty"` // an external script: its links resolve against Base
	// Compressed: the entry stores BodyS2, not Body (entries of older
	// builds store the body raw and do not set it).
	Compressed bool `json:"z,omitempty"`

	Body []byte `json:"-"` // the body as fetched
	// BodyS2 is Body as one S2 block; when set, the entry stores it, before
	// the JSON header, in place of Body, and the page keeps it as its raw
	// part (Page.RawS2).
	BodyS2 []byte `json:"-"`
}

// procHeaderRoom is the spare capacity left after a stored body so that
// encode can append the header in place: the entry is the body's bytes,
// not a copy of them.
const procHeaderRoom = 2 << 10

// maxProcBodyBytes bounds the body a stored compressed entry may state,
// checked before it is decompressed (the fetcher's own cap is far below).
const maxProcBodyBytes = 64 << 20

// compressBody is body as one S2 block with procHeaderRoom spare: S2
// encodes into scratch, which needs room for its worst case, and the block
// is copied out at its own size. Fetched bodies are kept so, between fetch
// and processing and then as the page's cached copy: a third of the bytes
// to write, and one compression instead of one here and one in the store.
func compressBody(scratch *sync.Pool, body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	buf, _ := scratch.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	if n := s2.MaxEncodedLen(len(body)); cap(*buf) < n {
		*buf = make([]byte, n)
	}
	block := s2.Encode((*buf)[:cap(*buf)], body)
	out := append(make([]byte, 0, len(block)+procHeaderRoom), block...)
	if cap(*buf) <= 4<<20 {
		scratch.Put(buf)
	}
	return out
}

func procKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(pfxProc), seq)
}

// encode: the stored body (BodyS2 when set, else Body), JSON header,
// header length (uint32 BE). The body goes first so that the header is
// appended in the body's spare capacity (procHeaderRoom); bytes past the
// body's length are the entry's, never the body's.
func (e *procEntry) encode() []byte {
	e.Compressed = len(e.BodyS2) > 0
	hdr, _ := json.Marshal(e) // cannot fail: plain fields
	out := e.Body
	if e.Compressed {
		out = e.BodyS2
	}
	if cap(out)-len(out) < len(hdr)+4 {
		out = append(make([]byte, 0, len(out)+len(hdr)+4), out...)
	}
	out = append(out, hdr...)
	return binary.BigEndian.AppendUint32(out, uint32(len(hdr)))
}

func decodeProcEntry(b []byte) (*procEntry, error) {
	if len(b) < 4 {
		return nil, errors.New("decode processing entry: too short")
	}
	n := uint64(binary.BigEndian.Uint32(b[len(b)-4:]))
	if n > uint64(len(b)-4) {
		return nil, errors.New("decode processing entry: bad header length")
	}
	body := len(b) - 4 - int(n)
	e := new(procEntry)
	if err := json.Unmarshal(b[body:len(b)-4], e); err != nil {
		return nil, fmt.Errorf("decode processing entry: %w", err)
	}
	if !e.Compressed {
		e.Body = b[:body:body]
		return e, nil
	}
	e.BodyS2 = b[:body:body]
	size, err := s2.DecodedLen(e.BodyS2)
	if err == nil && size > maxProcBodyBytes {
		err = fmt.Errorf("body of %d bytes", size)
	}
	if err == nil {
		e.Body, err = s2.Decode(make([]byte, size), e.BodyS2)
	}
	if err != nil {
		return nil, fmt.Errorf("decode processing entry: compressed body: %w", err)
	}
	return e, nil
}

var errAlreadyProcessed = errors.New("processing entry already processed")

type procItem struct {
	key   []byte
	entry *procEntry // nil: load from Badger
	// credit: the item holds its fetch's admission credit, given back
	// once it is processed.
	credit bool
}

func (c *Crawler) countProcessing() (int64, error) {
	var n int64
	err := c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxProc)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count processing queue: %w", err)
	}
	return n, nil
}

// leftoverProcessing lists the entries a previous run left in the
// processing queue (stopped or killed between fetch and store). Run calls it
// before any fetch worker starts, so the list holds no entry of this run.
func (c *Crawler) leftoverProcessing() ([][]byte, error) {
	var keys [][]byte
	err := c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxProc)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan processing queue: %w", err)
	}
	return keys, nil
}

// replayProcessing feeds leftover entries to the processing workers.
func (c *Crawler) replayProcessing(ctx context.Context, keys [][]byte) {
	if len(keys) > 0 {
		c.log.Info("processing responses left by the previous run", "n", len(keys))
	}
	for _, k := range keys {
		select {
		case c.proc <- procItem{key: k}:
		case <-ctx.Done():
			return
		}
	}
}

func (c *Crawler) processLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-c.proc:
			c.processWithRetry(ctx, it)
		}
	}
}

// processWithRetry retries a failing entry (Sink or Badger unavailable) with
// backoff; the entry stays in Badger throughout, so giving up at shutdown
// loses nothing.
func (c *Crawler) processWithRetry(ctx context.Context, it procItem) {
	if it.credit {
		start := time.Now() // real time: the mean is of real work
		defer func() {
			c.credits.observeProcess(time.Since(start))
			c.credits.release()
		}()
	}
	wait := 100 * time.Millisecond
	for {
		err := c.process(ctx, it)
		if err == nil || ctx.Err() != nil {
			return
		}
		c.log.Warn("processing failed, will retry", "key", fmt.Sprintf("%x", it.key), "err", err, "wait", wait)
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// process parses one fetched response, claims its content, forwards foreign
// links, stores the page, and then, in one transaction, enqueues the local
// links, updates the URL's record and deletes the entry.
func (c *Crawler) process(ctx context.Context, it procItem) error {
	e := it.entry
	if e == nil {
		err := c.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(it.key)
			if err != nil {
				return err
			}
			return item.Value(func(v []byte) error {
				var err error
				e, err = decodeProcEntry(bytes.Clone(v))
				return err
			})
		})
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil // done by someone else (cannot happen, harmless)
		}
		if err != nil {
			if strings.Contains(err.Error(), "decode processing entry") {
				c.count.err("corrupt_entry")
				return c.deleteEntry(it.key)
			}
			return fmt.Errorf("load processing entry: %w", err)
		}
	}
	pageURL, err := url.Parse(e.URL)
	if err != nil {
		c.count.err("bad_url")
		return c.deleteEntry(it.key)
	}

	var links []Discovered
	var page *Page
	var newHash []byte
	var newSim uint64
	var stored bool
	switch {
	case e.Status >= 300 && e.Status < 400:
		if e.Location == "" {
			c.count.err("bad_redirect")
			break
		}
		// The target is a new URL with the source's cash and depth + 1;
		// loops end at the URL-seen set. A target that itself answered with
		// a redirect closes a loop: counted, not followed again.
		if c.redirectedBefore(e.Location) {
			c.count.err("redirect_loop")
		}
		if e.Base != "" {
			// A script that moved is still a script, on this host only.
			if u, err := url.Parse(e.Location); err != nil || HostKey(u) != e.Host {
				c.count.filter("script_host")
				break
			}
		}
		links = append(links, Discovered{URL: e.Location, SourceHost: e.Host, Cash: e.Cash, Depth: e.Depth + 1, Base: e.Base})
	case e.Base != "" && e.Status >= 200 && e.Status < 300:
		links = c.scriptOutLinks(e)
	case e.Status >= 200 && e.Status < 300:
		parsed, perr := c.parse(e, pageURL)
		if perr != nil {
			c.count.err(ErrorClass(perr))
			break
		}
		if parsed == nil {
			break // a content type we do not parse
		}
		page = &Page{
			URL: e.URL, Host: e.Host, Status: e.Status, FetchedAt: time.Unix(0, e.FetchedAt),
			ContentType: e.ContentType, Charset: parsed.Charset, Lang: parsed.Lang, Header: e.Header,
			Raw: e.Body, RawS2: e.BodyS2, Title: parsed.Title, Headings: parsed.Headings, Text: parsed.Text, Links: parsed.Links,
			NoIndex: parsed.NoIndex, Cash: e.History, Depth: e.Depth,
		}
		page.ContentHash = ContentHash(parsed.Text)
		page.SimHash = SimHash(parsed.Text)
		newHash, newSim = page.ContentHash[:], page.SimHash
		if len(e.PrevHash) == 16 && !bytes.Equal(e.PrevHash, newHash) {
			var old [16]byte
			copy(old[:], e.PrevHash)
			if err := c.dups.Release(ctx, e.URL, old, e.PrevSim); err != nil {
				return fmt.Errorf("release old content claim: %w", err)
			}
		}
		if !parsed.NoIndex {
			dupOf, err := c.dups.Claim(ctx, e.URL, page.Lang, page.ContentHash, page.SimHash)
			if err != nil {
				return fmt.Errorf("near-duplicate claim: %w", err)
			}
			page.DuplicateOf = dupOf
		}
		links = c.outLinks(e, parsed)
		stored = true
	}

	local, foreign := c.split(links)
	if len(foreign) > 0 {
		if err := c.sink.Forward(ctx, foreign); err != nil {
			c.count.err("forward")
			return fmt.Errorf("forward %d links: %w", len(foreign), err)
		}
	}
	if page != nil {
		if err := c.sink.Store(ctx, page); err != nil {
			c.count.err("store")
			return fmt.Errorf("store %s: %w", e.URL, err)
		}
	} else {
		if qs, ok := c.sink.(QueueSink); ok && len(local) > 0 {
			links := make([]Discovered, len(local))
			for i, a := range local {
				links[i] = Discovered{URL: a.url, SourceHost: e.Host, Cash: a.cash, Depth: a.depth, Base: a.base}
			}
			if err := qs.Queue(ctx, e.Host, e.URL, links); err != nil {
				c.count.err("store")
				return fmt.Errorf("keep the links of %s: %w", e.URL, err)
			}
		}
		c.noteFetched(e.Host, e.URL)
	}
	now := c.clock.Now()
	hash := hashURL(e.URL)
	finish := func(txn *badger.Txn) error {
		// The entry must still be there: processing it twice would pay its
		// cash out twice.
		if _, err := txn.Get(it.key); err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				return errAlreadyProcessed
			}
			return err
		}
		if err := txn.Delete(it.key); err != nil {
			return err
		}
		if !stored {
			return nil
		}
		sk := seenKey(e.Host, hash)
		item, err := txn.Get(sk)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil // host handed off meanwhile
		} else if err != nil {
			return err
		}
		var rec *seenRecord
		if err := item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err }); err != nil {
			return nil // corrupt: leave it, the URL stays done
		}
		changed := len(e.PrevHash) == 0 || !bytes.Equal(e.PrevHash, newHash)
		rec.ContentHash, rec.SimHash = newHash, newSim
		if err := c.scheduleRecrawl(txn, e.Host, hash, rec, changed, now); err != nil {
			return err
		}
		return txn.Set(sk, rec.encode())
	}
	if _, err := c.addChunked(local, finish, e.Host); errors.Is(err, errAlreadyProcessed) {
		return nil
	} else if err != nil {
		return fmt.Errorf("enqueue links of %s: %w", e.URL, err)
	}
	c.pendingAdd(-1)
	if page != nil {
		c.count.stored.Add(1)
		if page.DuplicateOf != "" {
			c.count.duplicates.Add(1)
		}
	}
	c.count.forwarded.Add(int64(len(foreign)))
	return nil
}

// redirectedBefore reports whether raw was fetched here and was a redirect.
func (c *Crawler) redirectedBefore(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	var redirected bool
	_ = c.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(seenKey(HostKey(u), hashURL(raw)))
		if err != nil {
			return nil
		}
		return item.Value(func(v []byte) error {
			if r, err := decodeSeenRecord(v); err == nil && r.State == stateDone && r.Outcome == "3xx" {
				redirected = true
			}
			return nil
		})
	})
	return redirected
}

func (c *Crawler) deleteEntry(key []byte) error {
	if err := c.db.Update(func(txn *badger.Txn) error { return txn.Delete(key) }); err != nil {
		return fmt.Errorf("delete processing entry: %w", err)
	}
	c.pendingAdd(-1)
	return nil
}

// parse runs the parser that fits the content type; nil, nil for types we
// do not parse (their URL stays fetched).
func (c *Crawler) parse(e *procEntry, pageURL *url.URL) (*Parsed, error) {
	mt, _, err := mime.ParseMediaType(e.ContentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.SplitN(e.ContentType, ";", 2)[0]))
	}
	switch {
	case mt == "" || mt == "text/html" || mt == "application/xhtml+xml":
		return ParseHTML(e.Body, e.ContentType, e.Header, pageURL)
	case mt == "text/plain":
		return ParseText(e.Body, e.ContentType, pageURL)
	}
	c.count.filter("content_type")
	return nil, nil
}

// scriptLinkWeight is a script link's share of a page's cash relative to an
// HTML link's: it is less sure to be a page, so it waits behind them.
const scriptLinkWeight = 0.5

// outLinks: the followable links share the page's cash (OPIC), equally but
// for script links (scriptLinkWeight) and external scripts, which take no
// share: a script is read once, and every page that includes it after that
// would pour cash into a URL that never passes it on. A canonical URL
// pointing elsewhere and a meta-refresh target are treated as links too
// (the page itself is still stored; if it is the same content as the
// canonical, the near-duplicate index marks one of them).
func (c *Crawler) outLinks(e *procEntry, p *Parsed) []Discovered {
	var links []Discovered
	var weights []float64
	total := 0.0
	add := func(d Discovered, w float64) {
		links = append(links, d)
		weights = append(weights, w)
		total += w
	}
	if !p.NoFollow {
		for _, l := range p.Links {
			if l.NoFollow {
				continue
			}
			w := 1.0
			switch {
			case l.Base != "":
				w = 0
			case l.Script:
				w = scriptLinkWeight
			}
			add(Discovered{URL: l.URL, Anchor: l.Anchor, SourceHost: e.Host, Depth: e.Depth + 1, Base: l.Base}, w)
		}
	}
	for _, extra := range []string{p.Canonical, p.RefreshURL} {
		if extra != "" && extra != e.URL {
			add(Discovered{URL: extra, SourceHost: e.Host, Depth: e.Depth + 1}, 1)
		}
	}
	if total > 0 {
		for i := range links {
			links[i].Cash = e.Cash * weights[i] / total
		}
	}
	return links
}

// scriptOutLinks: the links an external script names, resolved against
// the including page's base. They share the script's cash, if any, equally
// and are links of that page: the same depth as the script.
func (c *Crawler) scriptOutLinks(e *procEntry) []Discovered {
	base, err := url.Parse(e.Base)
	if err != nil {
		c.count.filter("bad_base")
		return nil
	}
	ct := e.ContentType
	if full := e.Header.Get("Content-Type"); full != "" {
		ct = full // with its charset parameter
	}
	found := ScriptLinks(e.Body, ct, base)
	links := make([]Discovered, 0, len(found))
	for _, l := range found {
		links = append(links, Discovered{URL: l.URL, SourceHost: e.Host, Cash: e.Cash / float64(len(found)), Depth: e.Depth})
	}
	return links
}

// split normalises and filters links, and splits them into owned (for the
// local frontier) and foreign (for Sink.Forward).
func (c *Crawler) split(links []Discovered) (local []addItem, foreign []Discovered) {
	prefetched := "" // most local links are to one host: one prefetch
	for _, d := range links {
		u, err := url.Parse(d.URL)
		if err != nil || u.Host == "" {
			u, err = NormalizeURL(d.URL, nil)
			if err != nil {
				c.count.filter("bad_url")
				continue
			}
		}
		host := HostKey(u)
		if !c.sink.Owns(host) {
			if d.Base != "" {
				// Scripts are taken on the includer's host only, which
				// was ours when the page was fetched.
				c.count.filter("script_host")
				continue
			}
			if reason, ok := c.filter.Check(u, d.Depth); !ok {
				c.count.filter(reason)
				continue
			}
			d.URL = u.String()
			foreign = append(foreign, d)
			continue
		}
		if it, ok := c.admitURL(u, d); ok {
			local = append(local, it)
			if name := u.Hostname(); name != prefetched {
				c.res.Prefetch(name)
				prefetched = name
			}
		}
	}
	return local, foreign
}

// route sends links where they belong, outside the processing stage
// (sitemaps): owned ones into the frontier, others to Sink.Forward.
func (c *Crawler) route(ctx context.Context, links []Discovered, extra func(txn *badger.Txn) error) error {
	local, foreign := c.split(links)
	if len(foreign) > 0 {
		if err := c.sink.Forward(ctx, foreign); err != nil {
			c.count.err("forward")
			return fmt.Errorf("forward %d links: %w", len(foreign), err)
		}
		c.count.forwarded.Add(int64(len(foreign)))
	}
	if len(local) == 0 && extra == nil {
		return nil
	}
	_, err := c.addChunked(local, extra)
	return err
}
