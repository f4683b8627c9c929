package p2p

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

// realisticBatch is 1,000 links found on one site: CMS-style paths with
// random article IDs and slugs drawn from a vocabulary, short anchors,
// cash split evenly per source page (25 links per page).
func realisticBatch() []URLRecord {
	rng := rand.New(rand.NewPCG(7, 11))
	var vocab []string
	syll := []string{"ka", "lo", "mi", "tran", "port", "sen", "vel", "dar", "qui", "ber", "on", "est", "ul", "ra", "ti", "mon"}
	for len(vocab) < 300 {
		w := ""
		for j := 0; j < 2+rng.IntN(3); j++ {
			w += syll[rng.IntN(len(syll))]
		}
		vocab = append(vocab, w)
	}
	sections := []string{"news", "sport", "world", "tech", "science", "culture", "opinion", "travel", "food", "money"}
	recs := make([]URLRecord, 0, 1000)
	for i := 0; i < 1000; i++ {
		var slug []string
		for j := 0; j < 2+rng.IntN(4); j++ {
			slug = append(slug, vocab[rng.IntN(len(vocab))])
		}
		anchor := vocab[rng.IntN(len(vocab))] + " " + vocab[rng.IntN(len(vocab))]
		recs = append(recs, URLRecord{
			URL:        fmt.Sprintf("https://www.example.com/%s/2024/%02d/%s-%d.html", sections[rng.IntN(len(sections))], 1+rng.IntN(12), strings.Join(slug, "-"), 100000+rng.IntN(900000)),
			Anchor:     anchor,
			SourceHost: fmt.Sprintf("blog%d.example.org", i/250),
			Cash:       1.0 / float64(25+i/25),
			Depth:      1 + rng.IntN(4),
		})
	}
	return recs
}

func sortedByURL(recs []URLRecord) []URLRecord {
	c := slices.Clone(recs)
	slices.SortStableFunc(c, func(a, b URLRecord) int { return strings.Compare(a.URL, b.URL) })
	return c
}

func TestURLBatchRoundTripAndSize(t *testing.T) {
	recs := realisticBatch()
	msg, err := encodeURLBatch(recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeURLBatch(msg, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sortedByURL(recs)) {
		t.Fatal("batch did not round-trip")
	}
	wire := len(msg) + uvarintLen(uint64(len(msg)))
	perURL := float64(wire) / float64(len(recs))
	t.Logf("1000 URLs from one site: %d bytes on the wire, %.1f bytes/URL", wire, perURL)
	if perURL > 40 {
		t.Fatalf("%.1f bytes per URL exceeds the 40-byte budget", perURL)
	}
}

func TestOutboxRecordRoundTrip(t *testing.T) {
	r := URLRecord{URL: "http://a.test/x", Anchor: "x", SourceHost: "b.test", Cash: 0.25, Depth: 3, Hops: 2}
	got, err := decodeOutboxRecord(encodeOutboxRecord(r))
	if err != nil || got != r {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestHeartbeatRoundTrip(t *testing.T) {
	a := ma.StringCast("/ip4/127.0.0.1/tcp/4001")
	b := ma.StringCast("/ip6/::1/udp/4001/quic-v1")
	hb := heartbeat{SentMs: 12345, Addrs: []ma.Multiaddr{a, b}, Load: Load{Pages: 1, Frontier: 2, Hosts: 3, OutboxDepth: 4}}
	got, err := decodeHeartbeat(encodeHeartbeat(hb))
	if err != nil {
		t.Fatal(err)
	}
	if got.SentMs != hb.SentMs || got.Load != hb.Load || len(got.Addrs) != 2 || !got.Addrs[0].Equal(a) || !got.Addrs[1].Equal(b) {
		t.Fatalf("heartbeat round trip: %+v", got)
	}
}

func TestDecodersRejectGarbage(t *testing.T) {
	good, _ := encodeURLBatch(realisticBatch()[:3])
	bomb := func() []byte {
		// 10 MB of zeros deflates to a few KB: must be refused, not inflated.
		big := make([]byte, 10<<20)
		var buf bytes.Buffer
		buf.WriteByte(wireVersion)
		zw, _ := newFlateWriter(&buf)
		zw.Write(big)
		zw.Close()
		return buf.Bytes()
	}()
	cases := []struct {
		name   string
		decode func([]byte) error
		in     []byte
	}{
		{"batch empty", batchErr, nil},
		{"batch bad version", batchErr, []byte{9, 1, 2}},
		{"batch truncated", batchErr, good[:len(good)/2]},
		{"batch bomb", batchErr, bomb},
		{"batch not deflate", batchErr, []byte{wireVersion, 0xff, 0xff, 0xff}},
		{"heartbeat empty", func(b []byte) error { _, err := decodeHeartbeat(b); return err }, nil},
		{"heartbeat bad flags", func(b []byte) error { _, err := decodeHeartbeat(b); return err }, []byte{wireVersion, 0x80, 0, 0, 0, 0, 0, 0}},
		{"heartbeat bad addr", func(b []byte) error { _, err := decodeHeartbeat(b); return err }, []byte{wireVersion, 0, 1, 1, 3, 0xff, 0xff, 0xff, 0, 0, 0, 0}},
		{"deliver empty topic", func(b []byte) error { _, _, err := decodeDeliver(b); return err }, []byte{wireVersion, 0}},
		{"claim empty key", func(b []byte) error { _, err := decodeClaim(b); return err }, []byte{wireVersion, 0, 0, 0}},
		{"response bad status", func(b []byte) error { _, _, err := decodeResponse(b); return err }, []byte{wireVersion, 7}},
		{"outbox record trailing", func(b []byte) error { _, err := decodeOutboxRecord(b); return err }, append(encodeOutboxRecord(URLRecord{URL: "http://a/"}), 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.decode(c.in)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("want ErrMalformed, got %v", err)
			}
		})
	}
}

func batchErr(b []byte) error { _, err := decodeURLBatch(b, 1<<20); return err }

func TestClaimBatchWire(t *testing.T) {
	es := []claimEntry{{Key: []byte("fp-1"), Value: "http://a.test/x"}, {Key: []byte("fp-1"), Value: "http://b.test/"}, {Key: make([]byte, maxClaimKeyBytes), Value: ""}}
	got, err := decodeClaimBatch(encodeClaimBatch(es))
	if err != nil || !reflect.DeepEqual(got, es) {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	as := []claimAnswer{{Status: claimWon, Winner: "http://a.test/x"}, {Status: claimNotHere}, {Status: claimRefused}, {Status: claimThrottled}, {Status: claimWon}}
	gotAs, err := decodeClaimAnswers(encodeClaimAnswers(as), len(as))
	if err != nil || !reflect.DeepEqual(gotAs, as) {
		t.Fatalf("answers round trip: %v %+v", err, gotAs)
	}

	full := make([]claimEntry, maxClaimBatch+1)
	for i := range full {
		full[i] = claimEntry{Key: []byte{byte(i)}, Value: "http://a.test/"}
	}
	good := encodeClaimBatch(es)
	batchCases := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"version only", []byte{wireVersion}},
		{"bad version", append([]byte{wireVersion + 1}, good[1:]...)},
		{"no claims", []byte{wireVersion, 0}},
		{"too many claims", encodeClaimBatch(full)},
		{"count beyond the bytes", []byte{wireVersion, 200, 1, 1, 'k', 0}},
		{"empty key", encodeClaimBatch([]claimEntry{{Key: nil, Value: "http://a.test/"}})},
		{"key too long", encodeClaimBatch([]claimEntry{{Key: make([]byte, maxClaimKeyBytes+1), Value: "http://a.test/"}})},
		{"value too long", encodeClaimBatch([]claimEntry{{Key: []byte("k"), Value: "http://a.test/" + strings.Repeat("x", maxClaimValueBytes)}})},
		{"truncated", good[:len(good)-3]},
		{"trailing bytes", append(append([]byte(nil), good...), 0)},
	}
	for _, c := range batchCases {
		t.Run("batch/"+c.name, func(t *testing.T) {
			if _, err := decodeClaimBatch(c.in); !errors.Is(err, ErrMalformed) {
				t.Fatalf("want ErrMalformed, got %v", err)
			}
		})
	}
	goodAs := encodeClaimAnswers(as)
	answerCases := []struct {
		name string
		in   []byte
		want int
	}{
		{"fewer answers than claims", goodAs, len(as) + 1},
		{"more answers than claims", goodAs, len(as) - 1},
		{"unknown status", []byte{wireVersion, 1, 9}, 1},
		{"winner too long", encodeClaimAnswers([]claimAnswer{{Status: claimWon, Winner: strings.Repeat("x", maxClaimValueBytes+1)}}), 1},
		{"truncated winner", goodAs[:5], len(as)},
		{"trailing bytes", append(append([]byte(nil), goodAs...), 0), len(as)},
		{"bad version", append([]byte{wireVersion + 1}, goodAs[1:]...), len(as)},
	}
	for _, c := range answerCases {
		t.Run("answers/"+c.name, func(t *testing.T) {
			if _, err := decodeClaimAnswers(c.in, c.want); !errors.Is(err, ErrMalformed) {
				t.Fatalf("want ErrMalformed, got %v", err)
			}
		})
	}
}

func TestFrameCap(t *testing.T) {
	var buf bytes.Buffer
	if err := writeFrame(&buf, make([]byte, 2000)); err != nil {
		t.Fatal(err)
	}
	if _, err := readFrame(bufio.NewReader(&buf), 1000); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized frame: %v", err)
	}
}

func TestValidateRecord(t *testing.T) {
	bad := []URLRecord{
		{URL: ""},
		{URL: "http://a/" + strings.Repeat("x", maxURLBytes)},
		{URL: "http://a/", Cash: math.NaN()},
		{URL: "http://a/", Cash: -1},
		{URL: "http://a/", Depth: -1},
		{URL: "http://a/", Hops: 300},
		{URL: "http://a/\xff"},
	}
	for _, r := range bad {
		if validateRecord(r) == nil {
			t.Errorf("record %+v accepted", r)
		}
	}
	if _, err := encodeURLBatch(bad[:1]); err == nil {
		t.Error("encoder accepted an invalid record")
	}
}

// countingWriter records the writes a frame takes.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) { w.writes++; return w.Buffer.Write(p) }

// A frame of a head and a body reads back as their concatenation, in one
// write when the body is small and two when it is not.
func TestWriteFrameParts(t *testing.T) {
	for _, tc := range []struct {
		head, body int
		writes     int
	}{
		{0, 0, 1}, {3, 0, 1}, {0, 100, 1}, {3, frameCopyMax, 1}, {3, frameCopyMax + 1, 2}, {40, 1 << 20, 2},
	} {
		head, body := bytes.Repeat([]byte("h"), tc.head), bytes.Repeat([]byte("b"), tc.body)
		var w countingWriter
		if err := writeFrameParts(&w, head, body); err != nil {
			t.Fatal(err)
		}
		got, err := readFrame(bufio.NewReader(&w.Buffer), 4<<20)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(head, body...)) {
			t.Errorf("head %d, body %d: read %d bytes back, not the parts", tc.head, tc.body, len(got))
		}
		if w.writes != tc.writes {
			t.Errorf("head %d, body %d: %d writes, want %d", tc.head, tc.body, w.writes, tc.writes)
		}
	}
}
