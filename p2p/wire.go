package p2p

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Wire formats. Every message on a stream is one frame: a uvarint length
// followed by that many bytes, capped by Config.MaxMessageBytes. Payloads
// start with a version byte so that formats can evolve behind the same
// (also versioned) protocol ID.

const (
	wireVersion = 1

	maxURLBytes         = 8 << 10
	maxAnchorBytes      = 1 << 10
	maxSourceHostBytes  = 300
	maxBatchRecords     = 100_000
	maxDepth            = 1 << 20
	maxAddrs            = 64
	maxAddrBytes        = 512
	maxTopicBytes       = 128
	maxClaimKeyBytes    = 1 << 10
	maxClaimValueBytes  = 8 << 10
	maxClaimPubKeyBytes = 1 << 10
	maxClaimSigBytes    = 1 << 10
	maxErrorBytes       = 1 << 10
)

// writeFrame writes one length-prefixed frame.
func writeFrame(w io.Writer, payload []byte) error { return writeFrameParts(w, nil, payload) }

// writeFrameParts writes one frame whose payload is head then body, without
// copying a large body behind the head: replica messages and search
// answers run to megabytes. A small frame is still one Write.
func writeFrameParts(w io.Writer, head, body []byte) error {
	n := len(head) + len(body)
	b := make([]byte, 0, binary.MaxVarintLen64+len(head)+min(len(body), frameCopyMax))
	b = binary.AppendUvarint(b, uint64(n))
	b = append(b, head...)
	if len(body) <= frameCopyMax {
		b, body = append(b, body...), nil
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	if len(body) > 0 {
		if _, err := w.Write(body); err != nil {
			return fmt.Errorf("write frame: %w", err)
		}
	}
	return nil
}

// frameCopyMax: a frame's body up to this size is copied behind its head
// and written at once; a larger one is written on its own.
const frameCopyMax = 16 << 10

// frameChunk is the first allocation for a frame's body.
const frameChunk = 4 << 10

// readFrame reads one length-prefixed frame of at most max bytes. The
// buffer grows as bytes arrive (doubling from frameChunk) instead of being
// allocated at the announced length: a peer that announces a large frame
// and sends nothing costs next to no memory.
func readFrame(r *bufio.Reader, max int) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("read frame length: %w", err)
	}
	if n > uint64(max) {
		return nil, malformed("frame of %d bytes exceeds cap %d", n, max)
	}
	size := int(n)
	buf := make([]byte, 0, min(size, frameChunk))
	for len(buf) < size {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(size-len(buf), cap(buf)))
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < size {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read frame body: %w", err)
		}
	}
	return buf, nil
}

// ---- URL batches ----------------------------------------------------------

// validateRecord checks one record against the caps the decoder enforces,
// so that a sender never produces a batch its peers will reject.
func validateRecord(r URLRecord) error {
	switch {
	case r.URL == "" || len(r.URL) > maxURLBytes:
		return fmt.Errorf("url length %d out of range", len(r.URL))
	case len(r.Anchor) > maxAnchorBytes:
		return fmt.Errorf("anchor of %d bytes exceeds %d", len(r.Anchor), maxAnchorBytes)
	case len(r.SourceHost) > maxSourceHostBytes:
		return fmt.Errorf("source host of %d bytes exceeds %d", len(r.SourceHost), maxSourceHostBytes)
	case math.IsNaN(r.Cash) || math.IsInf(r.Cash, 0) || r.Cash < 0:
		return fmt.Errorf("cash %v must be finite and non-negative", r.Cash)
	case r.Depth < 0 || r.Depth > maxDepth:
		return fmt.Errorf("depth %d out of range", r.Depth)
	case r.Hops < 0 || r.Hops > 255:
		return fmt.Errorf("hops %d out of range", r.Hops)
	case !utf8.ValidString(r.URL) || !utf8.ValidString(r.Anchor) || !utf8.ValidString(r.SourceHost):
		return errors.New("record is not valid UTF-8")
	}
	return nil
}

// EncodeURLBatch is the payload of one URL batch on the URL protocol
// (encodeURLBatch), for tools that speak the protocol themselves: the
// hostile testnet's attacker.
func EncodeURLBatch(recs []URLRecord) ([]byte, error) { return encodeURLBatch(recs) }

// encodeURLBatch encodes records column by column (URLs front-coded in
// sorted order, then anchors, source hosts with a same-as-previous marker,
// cash, depth, hops) and deflates the result: columns of similar values
// compress far better than interleaved records. The records are reordered
// (sorted by URL); the receiver does not care about order.
func encodeURLBatch(recs []URLRecord) ([]byte, error) {
	sorted := slices.Clone(recs)
	slices.SortStableFunc(sorted, func(a, b URLRecord) int { return strings.Compare(a.URL, b.URL) })
	var body []byte
	body = binary.AppendUvarint(body, uint64(len(sorted)))
	prev := ""
	for _, r := range sorted {
		if err := validateRecord(r); err != nil {
			return nil, fmt.Errorf("encode url batch: %w", err)
		}
		shared := commonPrefix(prev, r.URL)
		body = binary.AppendUvarint(body, uint64(shared))
		body = AppendLenBytes(body, []byte(r.URL[shared:]))
		prev = r.URL
	}
	for _, r := range sorted {
		body = AppendLenBytes(body, []byte(r.Anchor))
	}
	prevSrc := ""
	for i, r := range sorted {
		if i > 0 && r.SourceHost == prevSrc {
			body = append(body, 0)
			continue
		}
		body = binary.AppendUvarint(body, uint64(len(r.SourceHost))+1)
		body = append(body, r.SourceHost...)
		prevSrc = r.SourceHost
	}
	for _, r := range sorted {
		body = binary.BigEndian.AppendUint64(body, math.Float64bits(r.Cash))
	}
	for _, r := range sorted {
		body = binary.AppendUvarint(body, uint64(r.Depth))
	}
	for _, r := range sorted {
		body = append(body, byte(r.Hops))
	}
	var out bytes.Buffer
	out.WriteByte(wireVersion)
	zw := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(zw)
	zw.Reset(&out)
	if _, err := zw.Write(body); err != nil {
		return nil, fmt.Errorf("encode url batch: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode url batch: %w", err)
	}
	return out.Bytes(), nil
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// flateWriters and flateReaders are URL batches' compressors, reused: a
// writer at BestCompression allocates about a megabyte, and a crawling
// node encodes and decodes batches all the time. Each is Reset before
// use, so nothing of one batch reaches the next.
var (
	flateWriters = sync.Pool{New: func() any {
		zw, err := flate.NewWriter(nil, flate.BestCompression)
		if err != nil {
			panic(err) // only for an invalid level
		}
		return zw
	}}
	flateReaders = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
)

// decodeURLBatch decodes and validates a batch. maxBytes caps the inflated
// size, so a compression bomb costs at most maxBytes of memory.
func decodeURLBatch(msg []byte, maxBytes int) ([]URLRecord, error) {
	if len(msg) < 1 {
		return nil, malformed("empty url batch")
	}
	if msg[0] != wireVersion {
		return nil, malformed("url batch version %d", msg[0])
	}
	zr := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(zr)
	if err := zr.(flate.Resetter).Reset(bytes.NewReader(msg[1:]), nil); err != nil {
		return nil, malformed("inflate url batch: %v", err)
	}
	body, err := io.ReadAll(io.LimitReader(zr, int64(maxBytes)+1))
	if err != nil {
		return nil, malformed("inflate url batch: %v", err)
	}
	if len(body) > maxBytes {
		return nil, malformed("url batch inflates beyond %d bytes", maxBytes)
	}
	r := NewDecoder(body)
	// Each record needs at least 12 body bytes (prefix, suffix length,
	// anchor length, source marker, 8 bytes cash, depth, hops minus the
	// suffix), which bounds the count before anything is allocated.
	n := int(r.Uvarint(maxBatchRecords, "record count"))
	if r.Err() == nil && n*12 > len(r.Rest()) {
		return nil, malformed("record count %d larger than body", n)
	}
	if r.Err() != nil {
		return nil, r.Err()
	}
	recs := make([]URLRecord, n)
	prev := ""
	for i := range recs {
		shared := int(r.Uvarint(uint64(len(prev)), "shared prefix"))
		suffix := r.LenBytes(maxURLBytes, "url suffix")
		if r.Err() != nil {
			return nil, r.Err()
		}
		u := prev[:shared] + string(suffix)
		if u == "" || len(u) > maxURLBytes {
			return nil, malformed("url length %d out of range", len(u))
		}
		recs[i].URL = u
		prev = u
	}
	for i := range recs {
		recs[i].Anchor = string(r.LenBytes(maxAnchorBytes, "anchor"))
	}
	prevSrc := ""
	for i := range recs {
		tag := r.Uvarint(maxSourceHostBytes+1, "source host")
		if tag == 0 {
			if i == 0 {
				r.Fail("first source host refers to a previous one")
			}
			recs[i].SourceHost = prevSrc
			continue
		}
		prevSrc = string(r.Bytes(int(tag-1), "source host"))
		recs[i].SourceHost = prevSrc
	}
	for i := range recs {
		recs[i].Cash = math.Float64frombits(r.U64("cash"))
	}
	for i := range recs {
		recs[i].Depth = int(r.Uvarint(maxDepth, "depth"))
	}
	for i := range recs {
		recs[i].Hops = int(r.Byte())
	}
	if err := r.Done("url batch"); err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if err := validateRecord(rec); err != nil {
			return nil, malformed("%v", err)
		}
	}
	return recs, nil
}

// Outbox values hold one record each, uncompressed (compression happens
// per batch on the wire).
func encodeOutboxRecord(r URLRecord) []byte {
	b := []byte{wireVersion}
	b = AppendLenBytes(b, []byte(r.URL))
	b = AppendLenBytes(b, []byte(r.Anchor))
	b = AppendLenBytes(b, []byte(r.SourceHost))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.Cash))
	b = binary.AppendUvarint(b, uint64(r.Depth))
	b = binary.AppendUvarint(b, uint64(r.Hops))
	return b
}

func decodeOutboxRecord(b []byte) (URLRecord, error) {
	r := NewDecoder(b)
	if v := r.Byte(); r.Err() == nil && v != wireVersion {
		return URLRecord{}, malformed("outbox record version %d", v)
	}
	var rec URLRecord
	rec.URL = string(r.LenBytes(maxURLBytes, "url"))
	rec.Anchor = string(r.LenBytes(maxAnchorBytes, "anchor"))
	rec.SourceHost = string(r.LenBytes(maxSourceHostBytes, "source host"))
	rec.Cash = math.Float64frombits(r.U64("cash"))
	rec.Depth = int(r.Uvarint(maxDepth, "depth"))
	rec.Hops = int(r.Uvarint(255, "hops"))
	if err := r.Done("outbox record"); err != nil {
		return URLRecord{}, err
	}
	if err := validateRecord(rec); err != nil {
		return URLRecord{}, malformed("%v", err)
	}
	return rec, nil
}

// ---- responses --------------------------------------------------------------

const (
	statusOK    = 0
	statusError = 1
	// statusRefused is an error the handler refused the message with by
	// its rules (ErrRefused): sent again unchanged, it is refused again.
	statusRefused = 2
)

// encodeResponse is the reply of every request/response protocol: a status
// byte and a body (the payload on success, an error text otherwise).
func encodeResponse(status byte, body []byte) []byte {
	return append(responseHead(status), body...)
}

// responseHead is what a response's frame holds before its body.
func responseHead(status byte) []byte { return []byte{wireVersion, status} }

func decodeResponse(b []byte) (status byte, body []byte, err error) {
	r := NewDecoder(b)
	if v := r.Byte(); r.Err() == nil && v != wireVersion {
		return 0, nil, malformed("response version %d", v)
	}
	status = r.Byte()
	if r.Err() != nil {
		return 0, nil, r.Err()
	}
	if status > statusRefused {
		return 0, nil, malformed("response status %d", status)
	}
	if status != statusOK && len(r.Rest()) > maxErrorBytes {
		return 0, nil, malformed("error text of %d bytes", len(r.Rest()))
	}
	return status, r.Rest(), nil
}

// ---- heartbeat ----------------------------------------------------------------

// Load is what a member's heartbeat carries about its work. p2p does not
// interpret it except OutboxDepth, which it fills in itself.
type Load struct {
	Pages       uint64
	Frontier    uint64
	Hosts       uint64
	OutboxDepth uint64
}

type heartbeat struct {
	Leaving bool
	SentMs  uint64
	Addrs   []ma.Multiaddr
	Load    Load
}

// EncodeHeartbeat is the payload of a heartbeat sent at sentMs (Unix
// milliseconds) announcing addrs, for tools that publish on the membership
// topic themselves: the hostile testnet's attacker.
func EncodeHeartbeat(sentMs uint64, addrs []ma.Multiaddr) []byte {
	return encodeHeartbeat(heartbeat{SentMs: sentMs, Addrs: addrs})
}

func encodeHeartbeat(h heartbeat) []byte {
	b := []byte{wireVersion}
	var flags byte
	if h.Leaving {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, h.SentMs)
	addrs := h.Addrs
	if len(addrs) > maxAddrs {
		addrs = addrs[:maxAddrs]
	}
	b = binary.AppendUvarint(b, uint64(len(addrs)))
	for _, a := range addrs {
		b = AppendLenBytes(b, a.Bytes())
	}
	b = binary.AppendUvarint(b, h.Load.Pages)
	b = binary.AppendUvarint(b, h.Load.Frontier)
	b = binary.AppendUvarint(b, h.Load.Hosts)
	b = binary.AppendUvarint(b, h.Load.OutboxDepth)
	return b
}

func decodeHeartbeat(b []byte) (heartbeat, error) {
	r := NewDecoder(b)
	if v := r.Byte(); r.Err() == nil && v != wireVersion {
		return heartbeat{}, malformed("heartbeat version %d", v)
	}
	var h heartbeat
	flags := r.Byte()
	if flags&^1 != 0 {
		r.Fail("heartbeat flags %#x", flags)
	}
	h.Leaving = flags&1 != 0
	h.SentMs = r.Uvarint(math.MaxInt64, "timestamp")
	n := int(r.Uvarint(maxAddrs, "address count"))
	for i := 0; i < n && r.Err() == nil; i++ {
		raw := r.LenBytes(maxAddrBytes, "address")
		if r.Err() != nil {
			break
		}
		a, err := ma.NewMultiaddrBytes(raw)
		if err != nil {
			r.Fail("address: %v", err)
			break
		}
		h.Addrs = append(h.Addrs, a)
	}
	h.Load.Pages = r.Uvarint(math.MaxUint64, "pages")
	h.Load.Frontier = r.Uvarint(math.MaxUint64, "frontier")
	h.Load.Hosts = r.Uvarint(math.MaxUint64, "hosts")
	h.Load.OutboxDepth = r.Uvarint(math.MaxUint64, "outbox depth")
	if err := r.Done("heartbeat"); err != nil {
		return heartbeat{}, err
	}
	return h, nil
}

// ---- deliver ------------------------------------------------------------------

func encodeDeliver(topic string, payload []byte) []byte {
	return append(deliverHead(topic), payload...)
}

// deliverHead is what a delivery's frame holds before its payload.
func deliverHead(topic string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(topic))
	b = append(b, wireVersion)
	return AppendLenBytes(b, []byte(topic))
}

func decodeDeliver(b []byte) (topic string, payload []byte, err error) {
	r := NewDecoder(b)
	if v := r.Byte(); r.Err() == nil && v != wireVersion {
		return "", nil, malformed("deliver version %d", v)
	}
	t := r.LenBytes(maxTopicBytes, "topic")
	if r.Err() != nil {
		return "", nil, r.Err()
	}
	if len(t) == 0 || !utf8.Valid(t) {
		return "", nil, malformed("bad topic")
	}
	return string(t), r.Rest(), nil
}

// ---- claim ----------------------------------------------------------------------

// A claim carries its origin's public key and signature over the network
// name, key and value, so that every hop can check who claims (the sender
// of a forwarded claim is only its forwarder) and that the origin holds
// the host of the claimed URL.
type claimRequest struct {
	Hops   int
	Key    []byte
	Value  string
	PubKey []byte // origin's public key, libp2p protobuf encoding
	Sig    []byte // origin's signature over claimSigningBytes
}

func encodeClaim(c claimRequest) []byte {
	b := []byte{wireVersion, byte(c.Hops)}
	b = AppendLenBytes(b, c.Key)
	b = AppendLenBytes(b, []byte(c.Value))
	b = AppendLenBytes(b, c.PubKey)
	b = AppendLenBytes(b, c.Sig)
	return b
}

func decodeClaim(b []byte) (claimRequest, error) {
	r := NewDecoder(b)
	if v := r.Byte(); r.Err() == nil && v != wireVersion {
		return claimRequest{}, malformed("claim version %d", v)
	}
	var c claimRequest
	c.Hops = int(r.Byte())
	c.Key = r.LenBytes(maxClaimKeyBytes, "claim key")
	c.Value = string(r.LenBytes(maxClaimValueBytes, "claim value"))
	c.PubKey = r.LenBytes(maxClaimPubKeyBytes, "claim public key")
	c.Sig = r.LenBytes(maxClaimSigBytes, "claim signature")
	if err := r.Done("claim"); err != nil {
		return claimRequest{}, err
	}
	if len(c.Key) == 0 {
		return claimRequest{}, malformed("empty claim key")
	}
	return c, nil
}

// ---- claim batches -------------------------------------------------------------

// A claim batch (claims/1.0.0) carries claims of the stream's own peer
// only, for keys the receiver is the registry of by the sender's view:
// the sender is the origin, authenticated by the connection, so the
// claims are not signed and are never forwarded. Request: version, count,
// then each claim's key and value. Answer: version, count (the request's),
// then per claim a status byte, followed by the winning value for
// claimWon.
const (
	maxClaimBatch      = 512
	maxClaimBatchBytes = 1 << 20 // a sender's budget for keys and values of one batch

	claimWon       = 0 // the registry's winner follows
	claimRefused   = 1 // the origin does not hold the URL's host
	claimNotHere   = 2 // the receiver is not the key's registry by its view
	claimThrottled = 3 // the origin is over its claim allowance
)

type claimEntry struct {
	Key   []byte
	Value string
}

type claimAnswer struct {
	Status byte
	Winner string // with claimWon
}

func encodeClaimBatch(es []claimEntry) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, e := range es {
		n += 2*binary.MaxVarintLen64 + len(e.Key) + len(e.Value)
	}
	b := make([]byte, 0, n)
	b = append(b, wireVersion)
	b = binary.AppendUvarint(b, uint64(len(es)))
	for _, e := range es {
		b = AppendLenBytes(b, e.Key)
		b = AppendLenBytes(b, []byte(e.Value))
	}
	return b
}

// decodeClaimBatch decodes a batch whose every claim has a key and a
// value within the caps; the values are not parsed yet.
func decodeClaimBatch(b []byte) ([]claimEntry, error) {
	r := NewDecoder(b)
	r.Version(wireVersion, "claim batch")
	n := r.Count(maxClaimBatch, 3, "claims") // key length, one key byte, value length
	if r.Err() == nil && n == 0 {
		return nil, malformed("empty claim batch")
	}
	es := make([]claimEntry, n)
	for i := range es {
		es[i].Key = r.LenBytes(maxClaimKeyBytes, "claim key")
		es[i].Value = string(r.LenBytes(maxClaimValueBytes, "claim value"))
		if r.Err() == nil && len(es[i].Key) == 0 {
			return nil, malformed("empty claim key")
		}
	}
	if err := r.Done("claim batch"); err != nil {
		return nil, err
	}
	return es, nil
}

func encodeClaimAnswers(as []claimAnswer) []byte {
	b := []byte{wireVersion}
	b = binary.AppendUvarint(b, uint64(len(as)))
	for _, a := range as {
		b = append(b, a.Status)
		if a.Status == claimWon {
			b = AppendLenBytes(b, []byte(a.Winner))
		}
	}
	return b
}

// decodeClaimAnswers decodes the answer to a batch of want claims.
func decodeClaimAnswers(b []byte, want int) ([]claimAnswer, error) {
	r := NewDecoder(b)
	r.Version(wireVersion, "claim answers")
	n := r.Count(maxClaimBatch, 1, "claim answers")
	if r.Err() == nil && n != want {
		return nil, malformed("%d claim answers for %d claims", n, want)
	}
	as := make([]claimAnswer, n)
	for i := range as {
		switch as[i].Status = r.Byte(); as[i].Status {
		case claimWon:
			as[i].Winner = string(r.LenBytes(maxClaimValueBytes, "claim winner"))
		case claimRefused, claimNotHere, claimThrottled:
		default:
			r.Fail("claim answer status %d", as[i].Status)
		}
	}
	if err := r.Done("claim answers"); err != nil {
		return nil, err
	}
	return as, nil
}

// claimSigningBytes is what a claim's origin signs: a domain separator,
// the network (a claim is not valid in another network), key and value.
func claimSigningBytes(network string, key []byte, value string) []byte {
	b := []byte("sou/claim/1\x00")
	b = AppendLenBytes(b, []byte(network))
	b = AppendLenBytes(b, key)
	return append(b, value...)
}

// signClaim fills in the origin's public key and signature.
func signClaim(c *claimRequest, network string, priv crypto.PrivKey) error {
	pub, err := crypto.MarshalPublicKey(priv.GetPublic())
	if err != nil {
		return fmt.Errorf("encode claim public key: %w", err)
	}
	sig, err := priv.Sign(claimSigningBytes(network, c.Key, c.Value))
	if err != nil {
		return fmt.Errorf("sign claim: %w", err)
	}
	c.PubKey, c.Sig = pub, sig
	return nil
}

// claimOrigin checks a claim's signature and returns who signed it. A bad
// key or signature is malformed: an honest node never sends one.
func claimOrigin(c claimRequest, network string) (peer.ID, error) {
	pub, err := crypto.UnmarshalPublicKey(c.PubKey)
	if err != nil {
		return "", malformed("claim public key: %v", err)
	}
	ok, err := pub.Verify(claimSigningBytes(network, c.Key, c.Value), c.Sig)
	if err != nil || !ok {
		return "", malformed("claim signature does not verify")
	}
	origin, err := peer.IDFromPublicKey(pub)
	if err != nil {
		return "", malformed("claim origin: %v", err)
	}
	return origin, nil
}

func newFlateWriter(w io.Writer) (*flate.Writer, error) {
	return flate.NewWriter(w, flate.BestCompression)
}

// ---- search ---------------------------------------------------------------------

// maxSearchTimeout bounds the time a remote may ask this node to work on a
// request.
const maxSearchTimeout = 2 * time.Minute

// A search request carries the caller's remaining time (relative, so
// clock skew does not matter) so that a shard stops working when the
// coordinator has stopped waiting; 0 means "no deadline given".
func encodeSearchRequest(timeout time.Duration, payload []byte) []byte {
	b := []byte{wireVersion}
	b = binary.AppendUvarint(b, uint64(max(timeout.Milliseconds(), 0)))
	return append(b, payload...)
}

func decodeSearchRequest(b []byte) (time.Duration, []byte, error) {
	r := NewDecoder(b)
	if v := r.Byte(); r.Err() == nil && v != wireVersion {
		return 0, nil, malformed("search request version %d", v)
	}
	ms := r.Uvarint(uint64(maxSearchTimeout.Milliseconds()), "timeout")
	if r.Err() != nil {
		return 0, nil, r.Err()
	}
	return time.Duration(ms) * time.Millisecond, r.Rest(), nil
}
