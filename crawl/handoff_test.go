package crawl

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

func engCrawler(t *testing.T, db *badger.DB, mutate func(*Config)) *Crawler {
	t.Helper()
	cfg := engConfig("127.0.0.1:1")
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(db, cfg, newEngSink(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keysWith lists the keys under c: that mention host.
func keysWith(t *testing.T, db *badger.DB, host string) []string {
	t.Helper()
	var out []string
	_ = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("c:")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); bytes.Contains(k, []byte(host)) {
				out = append(out, string(k))
			}
		}
		return nil
	})
	return out
}

func TestHandoffExportImportDrop(t *testing.T) {
	dbA := engOpenDB(t, t.TempDir())
	defer dbA.Close()
	a := engCrawler(t, dbA, nil)
	var seeds []Discovered
	for _, p := range []string{"/", "/a", "/b", "/c"} {
		seeds = append(seeds, Discovered{URL: "http://move.test" + p})
	}
	seeds = append(seeds, Discovered{URL: "http://stay.test/"})
	if err := a.Add(t.Context(), seeds); err != nil {
		t.Fatal(err)
	}
	// One URL of the host was fetched already.
	q, err := a.front.head(t.Context(), "move.test")
	if err != nil || q == nil {
		t.Fatal(q, err)
	}
	fetchedURL := q.rec.URL
	if err := a.front.finish(q, func(r *seenRecord) { r.Outcome = "2xx" }, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Add(t.Context(), []Discovered{{URL: "http://move.test/c", SourceHost: "x", Cash: 5}}); err != nil {
		t.Fatal(err)
	}

	exp, err := a.ExportHost(t.Context(), "move.test")
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.URLs) != 4 || exp.State == nil {
		t.Fatalf("export has %d URLs, state %q; want 4 and a state", len(exp.URLs), exp.State)
	}
	// The node ships it with gob or JSON.
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(exp); err != nil {
		t.Fatal(err)
	}
	var shipped HostExport
	if err := gob.NewDecoder(&buf).Decode(&shipped); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(exp)
	if err := json.Unmarshal(js, new(HostExport)); err != nil {
		t.Fatal(err)
	}

	dbB := engOpenDB(t, t.TempDir())
	defer dbB.Close()
	b := engCrawler(t, dbB, nil)
	// B already knew one URL of the host as queued: the fetched state wins.
	if err := b.Add(t.Context(), []Discovered{{URL: fetchedURL}}); err != nil {
		t.Fatal(err)
	}
	if err := b.ImportHost(t.Context(), &shipped); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Frontier != 3 {
		t.Fatalf("B frontier after import = %d, want 3", st.Frontier)
	}
	q, err = b.front.head(t.Context(), "move.test")
	if err != nil || q == nil || q.rec.URL != "http://move.test/c" {
		t.Fatalf("B head = %+v, %v; want the URL with the most cash", q, err)
	}
	if res, err := b.front.add([]addItem{{url: fetchedURL, host: "move.test"}}, nil); err != nil || res.New != 0 {
		t.Fatalf("fetched URL is new again on B: %+v %v", res, err)
	}
	hosts, _ := b.Hosts(t.Context())
	if strings.Join(hosts, ",") != "move.test" {
		t.Fatalf("B hosts = %v", hosts)
	}

	// Bad imports are refused with an error, never a panic.
	bad := []*HostExport{
		nil, {Host: ""}, {Host: "x.test", URLs: [][]byte{[]byte("{")}},
		{Host: "x.test", URLs: [][]byte{[]byte(`{"u":"http://other.test/","s":1}`)}},
		{Host: "x.test", State: []byte("nope")},
	}
	for i, e := range bad {
		if err := b.ImportHost(t.Context(), e); err == nil {
			t.Errorf("bad import %d accepted", i)
		}
	}

	// A forged host record cannot park the host: its next request is at
	// most maxImportedWait away.
	forged := hostRecord{NextAllowed: time.Now().Add(100 * 365 * 24 * time.Hour).UnixNano()}
	if err := b.ImportHost(t.Context(), &HostExport{Host: "parked.test", State: forged.encode()}); err != nil {
		t.Fatal(err)
	}
	b.front.mu.Lock()
	next := time.Unix(0, b.front.hosts["parked.test"].rec.NextAllowed)
	b.front.mu.Unlock()
	if next.After(time.Now().Add(maxImportedWait)) {
		t.Fatalf("imported next request at %v, more than %v away", next, maxImportedWait)
	}

	if err := a.DropHost(t.Context(), "move.test"); err != nil {
		t.Fatal(err)
	}
	if left := keysWith(t, dbA, "move.test"); len(left) != 0 {
		t.Fatalf("keys left after DropHost: %q", left)
	}
	if st := a.Stats(); st.Frontier != 1 {
		t.Fatalf("A frontier after drop = %d, want 1 (stay.test)", st.Frontier)
	}
	hosts, _ = a.Hosts(t.Context())
	if strings.Join(hosts, ",") != "stay.test" {
		t.Fatalf("A hosts after drop = %v", hosts)
	}
}

func TestMarkFetched(t *testing.T) {
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	c := engCrawler(t, db, nil)
	if err := c.Add(t.Context(), []Discovered{{URL: "http://r.test/queued"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkFetched(t.Context(), []string{"http://r.test/queued", "http://r.test/stored", "::bad"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(t.Context(), []Discovered{{URL: "http://r.test/stored"}, {URL: "http://r.test/new"}}); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Frontier != 1 {
		t.Fatalf("frontier = %d, want only the new URL", st.Frontier)
	}
}

// TestHostExportQueued: Queued lists the URLs still queued, with their
// cash, depth and script base, and none that were fetched.
func TestHostExportQueued(t *testing.T) {
	recs := []*seenRecord{
		{URL: "http://a.test/queued", State: stateQueued, QKey: []byte{1}, Cash: 0.5, Depth: 2},
		{URL: "http://a.test/done", State: stateDone},
		{URL: "http://a.test/app.js", State: stateQueued, QKey: []byte{2}, Base: "http://a.test/"},
	}
	e := &HostExport{Host: "a.test"}
	for _, r := range recs {
		e.URLs = append(e.URLs, r.encode())
	}
	e.URLs = append(e.URLs, []byte("not a record"))
	got := e.Queued()
	want := []Discovered{
		{URL: "http://a.test/queued", Cash: 0.5, Depth: 2},
		{URL: "http://a.test/app.js", Base: "http://a.test/"},
	}
	if len(got) != len(want) {
		t.Fatalf("Queued = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].URL != want[i].URL || got[i].Cash != want[i].Cash || got[i].Depth != want[i].Depth || got[i].Base != want[i].Base {
			t.Errorf("Queued[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestBatchesFitSmallTransactions: how many URLs a page links, a handoff
// carries or a replica marks fetched is up to a page or a peer; with a
// store whose transactions are small (a 1 MiB memtable: 157 KB) and long
// URLs, Add, ImportHost and MarkFetched still write every one, in as many
// transactions as needed.
func TestBatchesFitSmallTransactions(t *testing.T) {
	open := func() *badger.DB {
		db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).
			WithMemTableSize(1 << 20).WithValueThreshold(1 << 10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	long := func(host string, i int) string {
		return fmt.Sprintf("http://%s/%04d/%s", host, i, strings.Repeat("x", 900))
	}
	const n = 600
	a := engCrawler(t, open(), nil)
	var links []Discovered
	for i := range n {
		links = append(links, Discovered{URL: long("big.test", i)})
	}
	if err := a.Add(t.Context(), links); err != nil {
		t.Fatalf("add %d long links: %v", n, err)
	}
	if got := a.Stats().Frontier; got != n {
		t.Fatalf("frontier after adding %d links = %d", n, got)
	}
	exp, err := a.ExportHost(t.Context(), "big.test")
	if err != nil {
		t.Fatal(err)
	}
	b := engCrawler(t, open(), nil)
	if err := b.ImportHost(t.Context(), exp); err != nil {
		t.Fatalf("import %d records: %v", len(exp.URLs), err)
	}
	if got := b.Stats().Frontier; got != n {
		t.Fatalf("frontier after importing %d records = %d", n, got)
	}
	var fetched []string
	var again []Discovered
	for i := range n {
		fetched = append(fetched, long("done.test", i))
		again = append(again, Discovered{URL: long("done.test", i)})
	}
	if err := b.MarkFetched(t.Context(), fetched); err != nil {
		t.Fatalf("mark %d fetched: %v", n, err)
	}
	if err := b.Add(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	if got := b.Stats().Frontier; got != n {
		t.Fatalf("frontier after adding %d URLs marked fetched = %d, want %d (those imported)", n, got, n)
	}
}
