package node

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"sou/index"
	"sou/node/peermsg"
	"sou/placement"
)

// TestTakeoverPullsWhatOthersHold: a member that is not among a host's
// replicas now, but was one in an earlier view, holds a page, a fetch
// marker and a sitemap read of the host that the replica taking the host
// over lacks. The takeover's pull brings them over, so the new owner marks
// them fetched instead of fetching them again; a member that does not
// hold the host may not pull it.
func TestTakeoverPullsWhatOthersHold(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := threeNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var host string
	var taker, other *Node
	for i := 0; host == ""; i++ {
		h := fmt.Sprintf("pull-%d.example", i)
		reps := nodes[0].net.Replicas(h)
		for _, n := range nodes {
			if !slices.Contains(reps, n.net.ID()) {
				other = n
			}
		}
		if other != nil && len(reps) == 2 {
			host = h
			for _, n := range nodes {
				if n.net.ID() == reps[1] {
					taker = n
				}
			}
		}
	}
	page := htmlPage(host, "/kept-elsewhere", "kept elsewhere", "a page only a former replica holds")
	if err := other.ix.Put(ctx, DocumentFromPage(page)); err != nil {
		t.Fatal(err)
	}
	marker := "http://" + host + "/redirected"
	sitemap := peermsg.Sitemap{Host: host, URL: "http://" + host + "/sitemap.xml", Listed: []string{page.URL}}
	sm := peermsg.EncodeSitemap(sitemap)
	if err := other.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte(prefixFetchedMarker+host+"\x00"+marker), nil); err != nil {
			return err
		}
		return txn.Set([]byte(prefixSitemap+host+"\x00"+sitemap.URL), sm)
	}); err != nil {
		t.Fatal(err)
	}

	// Not a holder of the host: refused.
	req := peermsg.EncodePull(peermsg.Pull{Host: host})
	if err := other.net.Send(ctx, taker.net.ID(), topicReplicaPull, req); err == nil {
		t.Error("a pull by a member that does not hold the host was answered")
	}
	// Placement pulls the host from other (as it does from the members
	// closest to a host it takes over, or from the owner that hints it).
	if err := taker.place.stepIn(ctx, placement.Hinted{From: other.net.ID(), Hosts: []string{host}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := taker.ix.Get(ctx, page.URL); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pull never stored the page at the puller")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Once the pull is over, what other sends of the host is refused: it
	// does not hold it, and nobody asks it any more.
	late := DocumentFromPage(htmlPage(host, "/late", "late", "sent after the pull"))
	msg, err := peermsg.EncodePages(&peermsg.Pages{Docs: []*index.Document{late}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		refused := taker.place.refused.Load()
		_ = taker.inbound.receiveReplica(ctx, other.net.ID(), msg)
		if taker.place.refused.Load() > refused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a member not asked any more may still send replica items")
		}
		if err := taker.ix.Delete(ctx, late.URL); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := taker.ix.Get(ctx, late.URL); err == nil {
		t.Fatal("a refused page was stored")
	}

	// The takeover itself: mark fetched what was pulled.
	if err := taker.data.takeOver(ctx, taker.net, host); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if _, err := taker.ix.Get(ctx, page.URL); err != nil {
		t.Fatalf("new owner does not hold %s after the takeover: %v", page.URL, err)
	}
	// Pulled as a replica's, the page was held unindexed; taken over, it
	// is searchable.
	if err := taker.ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if held := taker.ix.Held()[host]; held != 0 || !indexedAt(t, taker.ix, "elsewhere", page.URL) {
		t.Errorf("after the takeover %d pages of %s are held, and %s is not in the postings", held, host, page.URL)
	}
	exp, err := taker.crawler.ExportHost(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{page.URL, marker} {
		found := false
		for _, rec := range exp.URLs {
			found = found || bytes.Contains(rec, []byte(u))
		}
		if !found {
			t.Errorf("%s is not in the new owner's URL-seen set: it would be fetched again", u)
		}
	}
	if !bytes.Contains(exp.State, []byte(sitemap.URL)) {
		t.Errorf("the sitemap read elsewhere is not in the new owner's host state: it would be read again")
	}
}

// indexedAt says whether the postings of word's term at ix list url.
func indexedAt(t *testing.T, ix *index.Index, word, url string) bool {
	t.Helper()
	toks := ix.Analyzer().AnalyzeQuery(word)
	if len(toks) != 1 {
		t.Fatalf("%q is %d terms", word, len(toks))
	}
	r := ix.NewReader()
	defer r.Close()
	p, err := r.Postings(toks[0].Term, false)
	if err != nil {
		t.Fatal(err)
	}
	for d := p.Doc(); d != index.NoMoreDocs; d = p.Next() {
		if rec, err := r.Record(d); err == nil && r.Live(d) && rec.URL == url {
			return true
		}
	}
	return false
}
