package p2p

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
)

// Every decoder of peer input has a fuzz target: no input may panic, and
// whatever decodes must survive a re-encode/decode round trip unchanged.
// Seeds live in testdata/fuzz/<target>/.

func FuzzDecodeURLBatch(f *testing.F) {
	good, _ := encodeURLBatch(realisticBatch()[:20])
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodeURLBatch(b, 1<<20)
		if err != nil {
			return
		}
		again, err := encodeURLBatch(recs)
		if err != nil {
			t.Fatalf("decoded batch does not re-encode: %v", err)
		}
		recs2, err := decodeURLBatch(again, 1<<20)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if !reflect.DeepEqual(sortedByURL(recs), recs2) {
			t.Fatal("round trip changed the batch")
		}
	})
}

func FuzzDecodeOutboxRecord(f *testing.F) {
	f.Add(encodeOutboxRecord(URLRecord{URL: "http://a.test/", Anchor: "a", SourceHost: "b.test", Cash: 1, Depth: 2, Hops: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeOutboxRecord(b)
		if err != nil {
			return
		}
		r2, err := decodeOutboxRecord(encodeOutboxRecord(r))
		if err != nil || r2 != r {
			t.Fatalf("round trip: %+v %v", r2, err)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add(encodeHeartbeat(heartbeat{SentMs: 1, Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/1")}, Load: Load{Pages: 3}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeartbeat(b)
		if err != nil {
			return
		}
		h2, err := decodeHeartbeat(encodeHeartbeat(h))
		if err != nil || h2.SentMs != h.SentMs || h2.Load != h.Load || h2.Leaving != h.Leaving || len(h2.Addrs) != len(h.Addrs) {
			t.Fatalf("round trip: %+v %v", h2, err)
		}
	})
}

func FuzzDecodeDeliver(f *testing.F) {
	f.Add(encodeDeliver("handoff", []byte("payload")))
	f.Fuzz(func(t *testing.T, b []byte) {
		topic, payload, err := decodeDeliver(b)
		if err != nil {
			return
		}
		t2, p2, err := decodeDeliver(encodeDeliver(topic, payload))
		if err != nil || t2 != topic || !bytes.Equal(p2, payload) {
			t.Fatal("round trip changed the message")
		}
	})
}

func FuzzDecodeClaim(f *testing.F) {
	f.Add(encodeClaim(claimRequest{Hops: 1, Key: []byte("fp"), Value: "http://a.test/"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeClaim(b)
		if err != nil {
			return
		}
		c2, err := decodeClaim(encodeClaim(c))
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatal("round trip changed the claim")
		}
	})
}

func FuzzDecodeClaimBatch(f *testing.F) {
	f.Add(encodeClaimBatch([]claimEntry{{Key: []byte("fp"), Value: "http://a.test/"}, {Key: []byte("fp2"), Value: "http://b.test/x"}}))
	f.Add(encodeClaimBatch([]claimEntry{{Key: []byte("k"), Value: ""}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeClaimBatch(b)
		if err != nil {
			return
		}
		if len(es) == 0 || len(es) > maxClaimBatch {
			t.Fatalf("decoded a batch of %d claims", len(es))
		}
		es2, err := decodeClaimBatch(encodeClaimBatch(es))
		if err != nil || !reflect.DeepEqual(es, es2) {
			t.Fatalf("round trip changed the batch: %v", err)
		}
	})
}

func FuzzDecodeClaimAnswers(f *testing.F) {
	f.Add(encodeClaimAnswers([]claimAnswer{{Status: claimWon, Winner: "http://a.test/"}, {Status: claimRefused}, {Status: claimNotHere}, {Status: claimThrottled}}), 4)
	f.Add(encodeClaimAnswers([]claimAnswer{{Status: claimWon}}), 1)
	f.Fuzz(func(t *testing.T, b []byte, want int) {
		as, err := decodeClaimAnswers(b, want)
		if err != nil {
			return
		}
		if len(as) != want {
			t.Fatalf("%d answers decoded for %d claims", len(as), want)
		}
		as2, err := decodeClaimAnswers(encodeClaimAnswers(as), want)
		if err != nil || !reflect.DeepEqual(as, as2) {
			t.Fatalf("round trip changed the answers: %v", err)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(encodeResponse(statusOK, []byte("body")))
	f.Add(encodeResponse(statusError, []byte("boom")))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, body, err := decodeResponse(b)
		if err != nil {
			return
		}
		st2, body2, err := decodeResponse(encodeResponse(st, body))
		if err != nil || st2 != st || !bytes.Equal(body, body2) {
			t.Fatal("round trip changed the response")
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	_ = writeFrame(&buf, []byte("hello"))
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := readFrame(bufio.NewReader(bytes.NewReader(b)), 1<<16)
		if err != nil {
			return
		}
		if len(msg) > 1<<16 {
			t.Fatal("frame beyond cap")
		}
	})
}

func FuzzDecodeSearchRequest(f *testing.F) {
	f.Add(encodeSearchRequest(1500*time.Millisecond, []byte("query")))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, req, err := decodeSearchRequest(b)
		if err != nil {
			return
		}
		if d < 0 || d > maxSearchTimeout {
			t.Fatalf("timeout %v out of range", d)
		}
		d2, req2, err := decodeSearchRequest(encodeSearchRequest(d, req))
		if err != nil || d2 != d || !bytes.Equal(req, req2) {
			t.Fatal("round trip changed the request")
		}
	})
}
