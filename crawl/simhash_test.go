package crawl

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/text/encoding/simplifiedchinese"
)

var simVocabulary = strings.Fields(`the a of and to in is was for on that with as by at from it this be are
crawler search engine index page link host node network query result rank score token word text document
server client request response cache store shard peer owner frontier politeness robots delay fetch parse
charset decode encode title heading anchor body content duplicate mirror near exact hash band distance
river mountain forest city village market bridge harbour garden library museum school teacher student
morning evening winter summer autumn spring rain snow wind cloud sun moon star ocean island desert`)

// simDoc builds a deterministic document of n sentences of 10-16 words.
func simDoc(seed int64, n int) []string {
	rng := rand.New(rand.NewSource(seed))
	sentences := make([]string, n)
	for i := range sentences {
		words := make([]string, 10+rng.Intn(7))
		for j := range words {
			words[j] = simVocabulary[rng.Intn(len(simVocabulary))]
		}
		sentences[i] = strings.Join(words, " ") + "."
	}
	return sentences
}

func TestContentHashMirrors(t *testing.T) {
	gbk := charsetSamples[0]
	utf8Page := []byte("<html><head><title>" + gbk.title + "</title></head><body><p>" + gbk.text + "</p></body></html>")
	gbkPage, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(strings.ReplaceAll(string(utf8Page), "<p>", "\n\n<p>  ")))
	if err != nil {
		t.Fatal(err)
	}
	page := mustURL(t, "http://example.com/")
	a, err := ParseHTML(utf8Page, "text/html; charset=utf-8", nil, page)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseHTML(gbkPage, "text/html; charset=gbk", nil, mustURL(t, "http://mirror.example.cn/"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Text != b.Text || ContentHash(a.Text) != ContentHash(b.Text) || SimHash(a.Text) != SimHash(b.Text) {
		t.Fatalf("mirror differs:\n%q\n%q", a.Text, b.Text)
	}
	if ContentHash(" a  b\n\tc ") != ContentHash("a b c") {
		t.Error("whitespace must not change the content hash")
	}
	if ContentHash("a b c") == ContentHash("a b d") || ContentHash("ab") == ContentHash("a b") {
		t.Error("different texts collide")
	}
}

func TestSimHashDistances(t *testing.T) {
	doc := simDoc(1, 50)
	text := strings.Join(doc, " ")
	base := SimHash(text)

	edited := append([]string(nil), doc...)
	w := strings.Fields(edited[20])
	w[3], w[7] = "changed", "edited"
	edited[20] = strings.Join(w, " ")
	if d := HammingDistance(base, SimHash(strings.Join(edited, " "))); d > 3 {
		t.Errorf("two words changed in one sentence of 50: distance %d > 3", d)
	}

	replaced := append([]string(nil), doc...)
	replaced[20] = simDoc(99, 1)[0]
	dSentence := HammingDistance(base, SimHash(strings.Join(replaced, " ")))
	t.Logf("one sentence of 50 replaced: distance %d", dSentence)
	if dSentence > 8 {
		t.Errorf("one sentence of 50 replaced: distance %d", dSentence)
	}

	for seed := int64(2); seed < 12; seed++ {
		other := SimHash(strings.Join(simDoc(seed, 50), " "))
		if d := HammingDistance(base, other); d <= 10 {
			t.Errorf("unrelated page (seed %d) at distance %d", seed, d)
		}
	}

	zh := strings.Repeat(charsetSamples[0].text, 3)
	zhEdited := strings.Replace(zh, "用户输入查询词", "读者输入关键字", 1)
	if d := HammingDistance(SimHash(zh), SimHash(zhEdited)); d > 3 {
		t.Errorf("CJK small edit: distance %d", d)
	}
	if d := HammingDistance(SimHash(zh), SimHash(strings.Repeat(charsetSamples[2].text, 3))); d <= 10 {
		t.Errorf("unrelated CJK pages: distance %d", d)
	}
	if SimHash("") != 0 || SimHash("  \n ") != 0 || SimHash("word") == 0 || SimHash("字") == 0 {
		t.Error("degenerate inputs")
	}
	if SimHash("Hello World") != SimHash("hello   world") {
		t.Error("case and spacing must not matter")
	}
	if HammingDistance(0, ^uint64(0)) != 64 || HammingDistance(5, 5) != 0 {
		t.Error("HammingDistance")
	}
}

func openTestBadger(t *testing.T, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func openNearDupIndex(t *testing.T, db *badger.DB, maxDistance int) *NearDupIndex {
	t.Helper()
	idx, err := NewNearDupIndex(db, maxDistance)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestNearDupIndex(t *testing.T) {
	dir := t.TempDir()
	db := openTestBadger(t, dir)
	ctx := context.Background()
	idx := openNearDupIndex(t, db, 3)

	textA := strings.Join(simDoc(1, 50), " ")
	exactA, simA := ContentHash(textA), SimHash(textA)
	textUnrelated := strings.Join(simDoc(7, 50), " ")
	exactU, simU := ContentHash(textUnrelated), SimHash(textUnrelated)
	nearSim := simA ^ 0b101 // distance 2
	farSim := simA ^ 0xF0F0 // distance 8
	var other [16]byte
	other[0] = 1

	claim := func(url string, exact [16]byte, sim uint64, want string) {
		t.Helper()
		got, err := idx.Claim(ctx, url, "", exact, sim)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Claim(%s) = %q, want %q", url, got, want)
		}
	}
	claim("http://a/", exactA, simA, "")
	claim("http://a/", exactA, simA, "")                      // idempotent
	claim("http://mirror/", exactA, simA^0xFFFF, "http://a/") // exact hash wins whatever the simhash
	claim("http://near/", other, nearSim, "http://a/")
	claim("http://far/", [16]byte{2}, farSim, "")
	claim("http://u/", exactU, simU, "")
	claim("http://mirror/", exactA, simA^0xFFFF, "http://a/") // still a dup, nothing was recorded

	// Pages without words (simhash 0) are only compared exactly.
	claim("http://empty1/", [16]byte{0xe1}, 0, "")
	claim("http://empty2/", [16]byte{0xe2}, 0, "")

	// Release frees both the exact hash and the bands.
	if err := idx.Release(ctx, "http://a/", exactA, simA); err != nil {
		t.Fatal(err)
	}
	claim("http://mirror/", exactA, simA, "")
	claim("http://mirror-near/", other, nearSim, "http://mirror/")
	// The canonical copy (the shorter URL) is never the duplicate, whichever
	// came first: it takes the content over, and later copies point to it.
	claim("http://near/", other, nearSim, "")
	claim("http://a/", exactA, simA, "")
	claim("http://mirror2/", exactA, simA, "http://a/")
	if err := idx.Release(ctx, "http://unknown/", other, 1); err != nil {
		t.Fatal(err)
	}

	// A page whose content changes replaces its old fingerprints.
	claim("http://changing/", [16]byte{9}, 0x0123456789abcdef, "")
	claim("http://changing/", [16]byte{10}, 0x7edcba9876543210, "")
	claim("http://newcomer/", [16]byte{9}, 0x0123456789abcdef, "")

	// Durable across a restart.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTestBadger(t, dir)
	defer db.Close()
	idx = openNearDupIndex(t, db, 3)
	claim("http://again/", exactU, simU, "http://u/")

	// Only our prefixes are used.
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key())
			if !strings.HasPrefix(k, "c:x/") && !strings.HasPrefix(k, "c:n/") && !strings.HasPrefix(k, "c:nu/") {
				return fmt.Errorf("foreign key %q", k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNearDupIndexExactOnly(t *testing.T) {
	db := openTestBadger(t, t.TempDir())
	defer db.Close()
	idx := openNearDupIndex(t, db, -1)
	ctx := context.Background()
	if d, _ := idx.Claim(ctx, "http://a/", "", [16]byte{1}, 42); d != "" {
		t.Fatal(d)
	}
	if d, _ := idx.Claim(ctx, "http://b/", "", [16]byte{2}, 42); d != "" {
		t.Fatalf("near-dup detection disabled, got %q", d)
	}
	if d, _ := idx.Claim(ctx, "http://c/", "", [16]byte{1}, 7); d != "http://a/" {
		t.Fatalf("exact dup missed: %q", d)
	}
}

func TestNearDupIndexConcurrent(t *testing.T) {
	db := openTestBadger(t, t.TempDir())
	defer db.Close()
	idx := openNearDupIndex(t, db, 3)
	ctx := context.Background()
	text := strings.Join(simDoc(3, 20), " ")
	exact, sim := ContentHash(text), SimHash(text)

	const n = 32
	results := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Half claim the exact content, half a near-duplicate of it.
			e, s := exact, sim
			if i%2 == 1 {
				e = [16]byte{byte(i)}
				s = sim ^ (1 << (i % 64))
			}
			dup, err := idx.Claim(ctx, fmt.Sprintf("http://h%d/", i), "", e, s)
			if err != nil {
				t.Error(err)
			}
			results[i] = dup
		}(i)
	}
	wg.Wait()
	// Copies that came before the canonical one may have won then; the
	// canonical copy (the shortest URL, h0) always wins, and every
	// duplicate points to a copy more canonical than itself.
	if results[0] != "" {
		t.Fatalf("the canonical copy http://h0/ was called a duplicate of %q", results[0])
	}
	for i, r := range results {
		if u := fmt.Sprintf("http://h%d/", i); r != "" && !canonicalBefore(r, u) {
			t.Errorf("%s called a duplicate of the less canonical %s", u, r)
		}
	}
	if dup, err := idx.Claim(ctx, "http://h99/", "", exact, sim); err != nil || dup != "http://h0/" {
		t.Fatalf("a late copy is a duplicate of %q (%v), want http://h0/", dup, err)
	}
}

func TestErrorClassNames(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("x: %w", ErrBadURL), "bad_url"},
		{fmt.Errorf("x: %w", ErrNXDomain), "dns_nxdomain"},
		{fmt.Errorf("x: %w", ErrDNS), "dns"},
		{fmt.Errorf("x: %w", ErrBlockedIP), "blocked_ip"},
		{fmt.Errorf("x: %w", ErrTooLarge), "too_large"},
		{fmt.Errorf("x: %w", ErrBadEncoding), "bad_encoding"},
		{fmt.Errorf("x: %w", ErrParse), "parse"},
		{fmt.Errorf("x: %w", ErrRedirectLoop), "redirect_loop"},
		{fmt.Errorf("x: %w", ErrRobotsUnavailable), "robots_5xx"},
		{fmt.Errorf("x: %w", context.Canceled), "canceled"},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("net/http: HTTP/1.x transport connection broken: malformed HTTP response \"junk\""), "protocol"},
		{fmt.Errorf("something else"), "other"},
	}
	for _, tc := range tests {
		if got := ErrorClass(tc.err); got != tc.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A near duplicate must declare the language of the copy it duplicates:
// the untranslated zh-CN page of a manual (its English text under Chinese
// navigation) is its readers' copy, not a duplicate of the English page.
// The same text is a duplicate whatever the language.
func TestNearDuplicatesOfOneLanguage(t *testing.T) {
	db := openTestBadger(t, t.TempDir())
	defer db.Close()
	ctx := context.Background()
	idx := openNearDupIndex(t, db, 3)
	text := strings.Join(simDoc(3, 50), " ")
	exact, sim := ContentHash(text), SimHash(text)
	for _, tc := range []struct {
		url, lang string
		exact     [16]byte
		sim       uint64
		want      string
	}{
		{"http://help.test/en-US/p.html", "en-us", exact, sim, ""},
		{"http://help.test/zh-CN/p.html", "zh-cn", [16]byte{1}, sim ^ 0b11, ""},
		{"http://help.test/zh-CN/p.html?v=2", "zh-cn", [16]byte{2}, sim ^ 0b1, "http://help.test/zh-CN/p.html"},
		{"http://help.test/en-US/p.html?v=2", "en-us", [16]byte{3}, sim ^ 0b1, "http://help.test/en-US/p.html"},
		{"http://help.test/zh-TW/p.html", "zh-tw", exact, sim, "http://help.test/en-US/p.html"},
		{"http://other.test/x.html", "", [16]byte{4}, sim ^ 0b100, ""},
	} {
		got, err := idx.Claim(ctx, tc.url, tc.lang, tc.exact, tc.sim)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("Claim(%s, %q) = %q, want %q", tc.url, tc.lang, got, tc.want)
		}
	}
}

// onlyBand returns a simhash at distance 3 from sim that shares only band
// b with it, so that finding sim from it needs a seek into band b.
func onlyBand(sim uint64, b int) uint64 {
	for other := 0; other < 4; other++ {
		if other != b {
			sim ^= 1 << (16*other + 5)
		}
	}
	return sim
}

// nearDupStep is one operation on a NearDupIndex: a claim with its
// expected result, a release, or a restart (close and reopen Badger and
// the index).
type nearDupStep struct {
	op      string // "claim", "release" or "reopen"
	url     string
	exact   uint16
	sim     uint64
	wantDup string
}

func runNearDupSteps(t *testing.T, steps []nearDupStep) {
	t.Helper()
	dir := t.TempDir()
	db := openTestBadger(t, dir)
	defer func() { db.Close() }()
	idx := openNearDupIndex(t, db, 3)
	ctx := context.Background()
	for i, s := range steps {
		exact := [16]byte{byte(s.exact >> 8), byte(s.exact)}
		switch s.op {
		case "claim":
			got, err := idx.Claim(ctx, s.url, "", exact, s.sim)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if got != s.wantDup {
				t.Fatalf("step %d: Claim(%s, %016x) = %q, want %q", i, s.url, s.sim, got, s.wantDup)
			}
		case "release":
			if err := idx.Release(ctx, s.url, exact, s.sim); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case "reopen":
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTestBadger(t, dir)
			idx = openNearDupIndex(t, db, 3)
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
	}
}

// The band counts skip a seek only where no band key can be: each case
// ends with a claim that finds its duplicate through a single band, after
// the operations most likely to leave a count too low.
func TestNearDupBandCountsNeverHideADuplicate(t *testing.T) {
	const simA, simB = 0x1111222233334444, 0x5555666677774444 // B shares band 0 with A
	sharedSim := func(i int) uint64 { return mix64(uint64(i))&^0xffff | 0x4444 }
	shared := func(n int) []nearDupStep {
		// n pages sharing band 0 and far apart, more than a count holds.
		steps := make([]nearDupStep, 0, 2*n)
		for i := 0; i < n; i++ {
			steps = append(steps, nearDupStep{op: "claim", url: fmt.Sprintf("http://s/%d", i), exact: uint16(1000 + i), sim: sharedSim(i)})
		}
		for i := 1; i < n; i++ {
			steps = append(steps, nearDupStep{op: "release", url: fmt.Sprintf("http://s/%d", i)})
		}
		return steps
	}
	cases := []struct {
		name  string
		steps []nearDupStep
	}{
		{"each band, same session", []nearDupStep{
			{op: "claim", url: "http://a/", exact: 1, sim: simA},
			{op: "claim", url: "http://q0/", exact: 2, sim: onlyBand(simA, 0), wantDup: "http://a/"},
			{op: "claim", url: "http://q1/", exact: 3, sim: onlyBand(simA, 1), wantDup: "http://a/"},
			{op: "claim", url: "http://q2/", exact: 4, sim: onlyBand(simA, 2), wantDup: "http://a/"},
			{op: "claim", url: "http://q3/", exact: 5, sim: onlyBand(simA, 3), wantDup: "http://a/"},
		}},
		{"each band, after reopen", []nearDupStep{
			{op: "claim", url: "http://a/", exact: 1, sim: simA},
			{op: "reopen"},
			{op: "claim", url: "http://q0/", exact: 2, sim: onlyBand(simA, 0), wantDup: "http://a/"},
			{op: "claim", url: "http://q1/", exact: 3, sim: onlyBand(simA, 1), wantDup: "http://a/"},
			{op: "claim", url: "http://q2/", exact: 4, sim: onlyBand(simA, 2), wantDup: "http://a/"},
			{op: "claim", url: "http://q3/", exact: 5, sim: onlyBand(simA, 3), wantDup: "http://a/"},
		}},
		{"release of one of two pages sharing a band", []nearDupStep{
			{op: "claim", url: "http://a/", exact: 1, sim: simA},
			{op: "claim", url: "http://b/", exact: 2, sim: simB},
			{op: "release", url: "http://a/"},
			{op: "claim", url: "http://q/", exact: 3, sim: onlyBand(simB, 0), wantDup: "http://b/"},
		}},
		{"release after reopen", []nearDupStep{
			{op: "claim", url: "http://a/", exact: 1, sim: simA},
			{op: "claim", url: "http://b/", exact: 2, sim: simB},
			{op: "reopen"},
			{op: "release", url: "http://a/"},
			{op: "claim", url: "http://q/", exact: 3, sim: onlyBand(simB, 0), wantDup: "http://b/"},
		}},
		{"release twice", []nearDupStep{
			{op: "claim", url: "http://a/", exact: 1, sim: simA},
			{op: "claim", url: "http://b/", exact: 2, sim: simB},
			{op: "release", url: "http://a/"},
			{op: "release", url: "http://a/", exact: 1, sim: simA},
			{op: "claim", url: "http://q/", exact: 3, sim: onlyBand(simB, 0), wantDup: "http://b/"},
		}},
		{"release of an unknown url with a stored page's fingerprints", []nearDupStep{
			{op: "claim", url: "http://b/", exact: 2, sim: simB},
			{op: "release", url: "http://unknown/", exact: 2, sim: simB},
			{op: "claim", url: "http://q/", exact: 3, sim: onlyBand(simB, 0), wantDup: "http://b/"},
		}},
		{"changed page keeping a band value", []nearDupStep{
			{op: "claim", url: "http://a/", exact: 1, sim: simA},
			{op: "claim", url: "http://a/", exact: 2, sim: simB},
			{op: "claim", url: "http://q/", exact: 3, sim: onlyBand(simB, 0), wantDup: "http://a/"},
		}},
		{"changed page turned into a duplicate", []nearDupStep{
			{op: "claim", url: "http://c/", exact: 9, sim: 0x0f0f0f0f0f0f0f0f},
			{op: "claim", url: "http://b/", exact: 2, sim: simB},
			{op: "claim", url: "http://a-longer/", exact: 1, sim: simA},
			{op: "claim", url: "http://a-longer/", exact: 9, sim: 0x0f0f0f0f0f0f0f0f, wantDup: "http://c/"},
			{op: "claim", url: "http://q/", exact: 3, sim: onlyBand(simB, 0), wantDup: "http://b/"},
		}},
		{"duplicate claim then release of the duplicate", []nearDupStep{
			{op: "claim", url: "http://b/", exact: 2, sim: simB},
			{op: "claim", url: "http://dup/", exact: 4, sim: simB ^ 1, wantDup: "http://b/"},
			{op: "release", url: "http://dup/", exact: 4, sim: simB ^ 1},
			{op: "claim", url: "http://q/", exact: 3, sim: onlyBand(simB, 0), wantDup: "http://b/"},
		}},
		{"more pages in a band than a count holds, all but one released", append(shared(300),
			nearDupStep{op: "claim", url: "http://query/", exact: 3, sim: onlyBand(sharedSim(0), 0), wantDup: "http://s/0"})},
		{"more pages in a band than a count holds, released after reopen", append(append(shared(300)[:300], nearDupStep{op: "reopen"}),
			append(shared(300)[300:],
				nearDupStep{op: "claim", url: "http://query/", exact: 3, sim: onlyBand(sharedSim(0), 0), wantDup: "http://s/0"})...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runNearDupSteps(t, tc.steps)
		})
	}
}

// Random claims, releases and restarts over few band values give the same
// answers as an index whose counts are all saturated, which seeks into
// every band as if it had no counts.
func TestNearDupBandCountsMatchFullScan(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	dir := t.TempDir()
	db := openTestBadger(t, dir)
	defer func() { db.Close() }()
	refDB := openTestBadger(t, t.TempDir())
	defer refDB.Close()
	idx := openNearDupIndex(t, db, 3)
	ref := openNearDupIndex(t, refDB, 3)
	saturate := func() {
		for b := range ref.bands {
			for v := range ref.bands[b] {
				ref.bands[b][v] = math.MaxUint8
			}
		}
	}
	saturate()
	// Variants of a few simhashes, a few bits apart: near duplicates are
	// common, and are found through one band or several.
	bases := make([]uint64, 6)
	for i := range bases {
		bases[i] = rng.Uint64()
	}
	randomSim := func() uint64 {
		sim := bases[rng.Intn(len(bases))]
		for flips := rng.Intn(4); flips > 0; flips-- {
			sim ^= 1 << rng.Intn(64)
		}
		return sim
	}
	ctx := context.Background()
	for i := 0; i < 600; i++ {
		url := fmt.Sprintf("http://h/%d", rng.Intn(60))
		exact := [16]byte{byte(rng.Intn(200))}
		sim := randomSim()
		switch r := rng.Intn(100); {
		case r < 2:
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTestBadger(t, dir)
			idx = openNearDupIndex(t, db, 3)
		case r < 25:
			if err := idx.Release(ctx, url, exact, sim); err != nil {
				t.Fatal(err)
			}
			if err := ref.Release(ctx, url, exact, sim); err != nil {
				t.Fatal(err)
			}
		default:
			got, err := idx.Claim(ctx, url, "", exact, sim)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Claim(ctx, url, "", exact, sim)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("op %d: Claim(%s, %016x) = %q, a full scan finds %q", i, url, sim, got, want)
			}
		}
	}
}
