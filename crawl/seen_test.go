package crawl

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestSeenRecordRoundTrip(t *testing.T) {
	tests := []*seenRecord{
		{URL: "http://a/", State: stateQueued, QKey: queueKey("a", 0.5, 2, 7), Cash: 0.5, History: 1.5, Depth: 2},
		{URL: "http://a/x?y=1", State: stateDone, Outcome: "2xx", FetchedAt: 1_700_000_000_000_000_000, ETag: `"abc"`,
			LastModified: "Mon, 02 Jan 2006 15:04:05 GMT", ContentHash: make([]byte, 16), SimHash: 1<<63 | 5,
			Interval: int64(86400e9), NextFetch: 1_800_000_000_000_000_000, Attempts: 3},
		// An external script: the optional Base field follows NextFetch.
		{URL: "http://a/js/m.js", State: stateQueued, QKey: queueKey("a", 0.25, 3, 8), Cash: 0.25, Depth: 3, Base: "http://a/docs/"},
	}
	for _, want := range tests {
		got, err := decodeSeenRecord(want.encode())
		if err != nil {
			t.Fatalf("decode %s: %v", want.URL, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

// TestSeenRecordGarbage: damaged or hostile records (handoff input) give an
// error, never a panic.
func TestSeenRecordGarbage(t *testing.T) {
	good := (&seenRecord{URL: "http://a/", State: stateDone, ContentHash: make([]byte, 16)}).encode()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		var b []byte
		switch i % 3 {
		case 0: // truncations
			b = good[:rng.IntN(len(good))]
		case 1: // bit flips
			b = append([]byte(nil), good...)
			b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
		default: // noise
			b = make([]byte, rng.IntN(64))
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
		}
		_, _ = decodeSeenRecord(b) // must not panic
	}
	if _, err := decodeSeenRecord(good[:len(good)-1]); err == nil {
		t.Fatal("truncated record accepted")
	}
	script := (&seenRecord{URL: "http://a/m.js", State: stateDone, Base: "http://a/"}).encode()
	if _, err := decodeSeenRecord(script[:len(script)-1]); err == nil {
		t.Fatal("record with a truncated base accepted")
	}
}

func TestBloomFilter(t *testing.T) {
	const n = 20000
	b := newBloomFilter(n)
	for i := range n {
		b.add(hashURL(fmt.Sprintf("http://h/%d", i)))
	}
	for i := range n {
		if !b.mayContain(hashURL(fmt.Sprintf("http://h/%d", i))) {
			t.Fatalf("false negative for %d", i)
		}
	}
	fp := 0
	for i := range n {
		if b.mayContain(hashURL(fmt.Sprintf("http://other/%d", i))) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.02 {
		t.Fatalf("false positive rate %.3f at design load, want about 0.01", rate)
	}
}
