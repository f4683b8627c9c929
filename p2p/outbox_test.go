package p2p

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// topicLog is a topic's sending side as a test sees it: batches of up to
// max records joined by commas, and what the outbox reported.
type topicLog struct {
	mu        sync.Mutex
	delivered []uint64
	failures  int
}

func (l *topicLog) topic(max int) OutboxTopic {
	return OutboxTopic{
		Batch: func(_ context.Context, _ peer.ID, recs [][]byte) ([]byte, int, error) {
			k := min(len(recs), max)
			return bytes.Join(recs[:k], []byte(",")), k, nil
		},
		Delivered: func(_ peer.ID, seq uint64) {
			l.mu.Lock()
			l.delivered = append(l.delivered, seq)
			l.mu.Unlock()
		},
		Failed: func(peer.ID, error) {
			l.mu.Lock()
			l.failures++
			l.mu.Unlock()
		},
		MaxRecords: max, SendTimeout: 5 * time.Second,
	}
}

func (l *topicLog) last() (uint64, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.delivered) == 0 {
		return 0, l.failures
	}
	return l.delivered[len(l.delivered)-1], l.failures
}

// TestOutboxTopics: records of a topic reach the peer's handler in order,
// in batches, and leave the outbox only once acknowledged, which the
// topic hears of with the last record's sequence number; a refused batch
// is retried (the topic hears of the failure) and survives a restart;
// Drop forgets a peer's records; URL records are a topic beside them.
func TestOutboxTopics(t *testing.T) {
	const topic = "test/1"
	b := startNode(t, nil, nil)
	var mu sync.Mutex
	var got []string
	refuse := true
	b.SetDeliverHandler(topic, func(_ context.Context, _ peer.ID, payload []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return errors.New("not now")
		}
		got = append(got, string(payload))
		return nil
	})
	adir := t.TempDir()
	adb := openDB(t, filepath.Join(adir, "db"))
	t.Cleanup(func() { adb.Close() })
	var log topicLog
	a := restartNode(t, adir, adb, nil, []*testNode{b})
	a.Outbox().SetTopic(topic, log.topic(2))
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })

	var recs [][]byte
	for i := range 5 {
		recs = append(recs, []byte(fmt.Sprint(i)))
	}
	last, err := a.Outbox().Append(b.ID(), topic, recs, true)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a refused delivery", func() bool { _, f := log.last(); return f > 0 })
	if d, _ := a.Outbox().Depth(topic); d != 5 {
		t.Fatalf("%d records left after refused deliveries, want 5", d)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if c := countPrefix(t, adb, outboxPrefix); c != 5 {
		t.Fatalf("%d records on disk after close, want 5", c)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()

	var log2 topicLog
	a2 := restartNode(t, adir, adb, nil, []*testNode{b})
	a2.Outbox().SetTopic(topic, log2.topic(2))
	waitFor(t, 20*time.Second, "delivery after restart", func() bool { s, _ := log2.last(); return s == last })
	mu.Lock()
	if want := []string{"0,1", "2,3", "4"}; !slices.Equal(got, want) {
		t.Errorf("batches %q, want %q", got, want)
	}
	mu.Unlock()
	if d, _ := a2.Outbox().Depth(topic); d != 0 || countPrefix(t, adb, outboxPrefix) != 0 {
		t.Fatalf("records left after acknowledgement: %d", d)
	}

	// Drop, and a topic beside the URL records.
	far, err := peer.Decode("12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Outbox().Append(far, "other/1", recs, false); err != nil {
		t.Fatal(err)
	}
	if err := a2.urls.appendURLs(far, []URLRecord{{URL: "http://x.test/"}}); err != nil {
		t.Fatal(err)
	}
	if ps := a2.Outbox().Peers("other/1"); !slices.Equal(ps, []peer.ID{far}) {
		t.Fatalf("peers of the topic: %v", ps)
	}
	if err := a2.Outbox().Drop(far, "other/1"); err != nil {
		t.Fatal(err)
	}
	if d, _ := a2.Outbox().Depth("other/1"); d != 0 || a2.OutboxDepth() != 1 {
		t.Fatalf("after Drop: %d records of the topic, %d URL records; want 0 and 1", d, a2.OutboxDepth())
	}
}

// TestOutboxLingersBetweenMessages: records of a lingering topic appended
// while one of its messages is in flight wait the topic's Linger after it
// and go together in the next message, not in a message of their own at
// once; after a full message the next goes at once.
func TestOutboxLingersBetweenMessages(t *testing.T) {
	const (
		topic  = "test/1"
		linger = time.Second
	)
	b := startNode(t, nil, nil)
	type message struct {
		payload string
		at      time.Time
	}
	var mu sync.Mutex
	var got []message
	hold := make(chan struct{})
	b.SetDeliverHandler(topic, func(_ context.Context, _ peer.ID, payload []byte) error {
		mu.Lock()
		got = append(got, message{string(payload), time.Now()})
		first := len(got) == 1
		mu.Unlock()
		if first {
			<-hold // the first message stays in flight until released
		}
		return nil
	})
	messages := func() []message {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	a := startNode(t, nil, []*testNode{b})
	var log topicLog
	tp := log.topic(3)
	tp.Linger = linger
	a.Outbox().SetTopic(topic, tp)
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	appendOne := func(rec string) {
		t.Helper()
		if _, err := a.Outbox().Append(b.ID(), topic, [][]byte{[]byte(rec)}, false); err != nil {
			t.Fatal(err)
		}
	}

	appendOne("0")
	waitFor(t, 10*time.Second, "the first message", func() bool { return len(messages()) == 1 })
	appendOne("1")
	released := time.Now()
	close(hold)
	time.Sleep(linger / 10)
	appendOne("2")
	waitFor(t, 10*time.Second, "the second message", func() bool { return len(messages()) == 2 })
	m := messages()[1]
	if m.payload != "1,2" {
		t.Errorf("second message %q, want \"1,2\": the records appended in flight and after it, together", m.payload)
	}
	if waited := m.at.Sub(released); waited < linger*9/10 {
		t.Errorf("second message %v after the first was released, want at least the linger (%v)", waited, linger)
	}

	// Five records: a full message of three, and the other two at once
	// after it.
	for i := range 5 {
		appendOne(fmt.Sprint(3 + i))
	}
	waitFor(t, 10*time.Second, "two more messages", func() bool { return len(messages()) == 4 })
	ms := messages()
	if ms[2].payload != "3,4,5" || ms[3].payload != "6,7" {
		t.Errorf("messages %q and %q, want \"3,4,5\" and \"6,7\"", ms[2].payload, ms[3].payload)
	}
	if gap := ms[3].at.Sub(ms[2].at); gap > linger/2 {
		t.Errorf("%v between a full message and the next, want no linger", gap)
	}
}

// TestOutboxLingerLeavesNothingQueued: records a lingering topic's read
// leaves for its byte budget, in a message with room for more records,
// are sent all the same (after a linger), not left queued until the next
// Append.
func TestOutboxLingerLeavesNothingQueued(t *testing.T) {
	const topic = "test/1"
	b := startNode(t, nil, nil)
	var mu sync.Mutex
	var got [][]byte
	b.SetDeliverHandler(topic, func(_ context.Context, _ peer.ID, payload []byte) error {
		mu.Lock()
		got = append(got, bytes.Split(payload, []byte(","))...)
		mu.Unlock()
		return nil
	})
	small := func(c *Config) { c.MaxMessageBytes = 4096 } // reads of about 2 KB
	a := startNode(t, small, []*testNode{b})
	var log topicLog
	tp := log.topic(100)
	tp.Linger = 100 * time.Millisecond
	a.Outbox().SetTopic(topic, tp)
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	recs := [][]byte{bytes.Repeat([]byte("a"), 1500), bytes.Repeat([]byte("b"), 1500), bytes.Repeat([]byte("c"), 1500)}
	if _, err := a.Outbox().Append(b.ID(), topic, recs, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every record delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(recs)
	})
	// The last message's records leave once its acknowledgement is back.
	waitFor(t, 10*time.Second, "an empty queue", func() bool { d, _ := a.Outbox().Depth(topic); return d == 0 })
}

// TestOutboxMovesLegacyURLRecords: URL records kept under the earlier key
// scheme are delivered after an upgrade.
func TestOutboxMovesLegacyURLRecords(t *testing.T) {
	b := startNode(t, nil, nil)
	var got collector
	b.SetURLHandler(got.handle)
	adir := t.TempDir()
	adb := openDB(t, filepath.Join(adir, "db"))
	t.Cleanup(func() { adb.Close() })
	a := restartNode(t, adir, adb, nil, []*testNode{b})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	host := hostOwnedBy(t, []peer.ID{a.ID(), b.ID()}, b.ID(), []peer.ID{a.ID(), b.ID()}, b.ID())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	const n = 3
	err := adb.Update(func(txn *badger.Txn) error {
		for i := range n {
			k := binary.BigEndian.AppendUint64([]byte(legacyOutboxPrefix+b.ID().String()+"/"), uint64(i+1))
			if err := txn.Set(k, encodeOutboxRecord(URLRecord{URL: fmt.Sprintf("http://%s/%d", host, i)})); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a2 := restartNode(t, adir, adb, nil, []*testNode{b})
	waitFor(t, 20*time.Second, "legacy records delivered", func() bool { return got.count() == n && a2.OutboxDepth() == 0 })
	if c := countPrefix(t, adb, legacyOutboxPrefix); c != 0 {
		t.Fatalf("%d legacy keys left", c)
	}
}
