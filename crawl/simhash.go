package crawl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
)

// Content fingerprints and the near-duplicate index.
//
// ContentHash is SHA-256 (first 16 bytes) of the decoded text with every run
// of whitespace collapsed to one space and the ends trimmed, so a mirror in
// another charset (GBK vs UTF-8) or with different line breaks collides.
//
// SimHash (Charikar; Manku et al. for the 64-bit, k=3 setting) uses as
// features: overlapping word 2-shingles (lowercased letters/digits) for
// non-CJK text and overlapping character bigrams for CJK runs (Han, kana,
// Hangul), weighted by frequency (each occurrence adds its vote). Shingles
// rather than single words keep unrelated pages with a shared vocabulary far
// apart; the price is that a changed sentence moves a page by a few bits.
//
// Badger layout (all keys under "c:", owned by this file):
//
//	"c:x/" + exact[16]                                  -> url
//	"c:n/" + band[1] + bandValue[2 BE] + sim[8 BE] + url  -> (empty)
//	"c:nu/" + url                                        -> exact[16] + sim[8 BE] + lang
//
// The 64-bit simhash is cut into 4 bands of 16 bits; two hashes within
// Hamming distance 3 share at least one band exactly (pigeonhole), so a
// claim scans only 4 small key ranges and checks each candidate's full hash,
// which is part of the key (no value reads). The reverse "c:nu/" entry makes
// a re-claim idempotent and lets a changed page replace its old entries.
// Distances above 3 are checked only among candidates sharing a band.
//
// A claim seeks only into the bands whose value has entries: the index
// keeps in memory, per band and band value, a count of its "c:n/" keys
// (bandCounts, 256 KiB whatever the number of pages), built from the keys
// at open. A count may be too high, never too low, so a skipped band never
// hides a duplicate.
//
// A near duplicate must declare the same language (Page.Lang) as the copy
// it is a duplicate of: a manual's untranslated pages are its English text
// under another language's navigation, within a few bits of the English
// page, yet each is its own readers' copy. The language is read from the
// candidate's "c:nu/" entry, only for candidates within the distance.
// Exact duplicates are the same text, whatever the declared language.

var (
	prefixExact   = []byte("c:x/")
	prefixNear    = []byte("c:n/")
	prefixNearURL = []byte("c:nu/")
)

var hashBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// ContentHash fingerprints whitespace-normalised text.
func ContentHash(text string) [16]byte {
	bp := hashBufPool.Get().(*[]byte)
	buf := (*bp)[:0]
	if isNormalizedSpace(text) {
		// ParseHTML's text is already collapsed: hash it as it is.
		buf = append(buf, text...)
	} else {
		buf = appendNormalizedSpace(buf, text)
	}
	sum := sha256.Sum256(buf)
	if cap(buf) <= 1<<20 {
		*bp = buf
		hashBufPool.Put(bp)
	}
	var out [16]byte
	copy(out[:], sum[:16])
	return out
}

// mayStartSpace reports whether a UTF-8 lead byte can begin a non-ASCII
// whitespace rune (U+0085, U+00A0, U+1680, U+2000..U+205F, U+3000, U+FEFF).
func mayStartSpace(c byte) bool {
	return c == 0xC2 || c == 0xE1 || c == 0xE2 || c == 0xE3 || c == 0xEF
}

// isNormalizedSpace reports whether text has no leading, trailing, doubled
// or non-' ' whitespace.
func isNormalizedSpace(text string) bool {
	prevSpace := true // a leading space is not normalised
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ':
			if prevSpace {
				return false
			}
			prevSpace = true
			i++
		case c < utf8.RuneSelf:
			if c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
				return false
			}
			prevSpace = false
			i++
		case mayStartSpace(c):
			r, size := utf8.DecodeRuneInString(text[i:])
			if isSpaceRune(r) {
				return false
			}
			prevSpace = false
			i += size
		default:
			prevSpace = false
			i++
		}
	}
	return !prevSpace || len(text) == 0
}

// appendNormalizedSpace appends text with whitespace runs collapsed to one
// space and the ends trimmed, copying runs of non-space bytes at once.
func appendNormalizedSpace(buf []byte, text string) []byte {
	start := -1
	flush := func(end int) {
		if start >= 0 {
			if len(buf) > 0 {
				buf = append(buf, ' ')
			}
			buf = append(buf, text[start:end]...)
			start = -1
		}
	}
	for i := 0; i < len(text); {
		c := text[i]
		size := 1
		space := false
		switch {
		case c < utf8.RuneSelf:
			space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
		case mayStartSpace(c):
			var r rune
			r, size = utf8.DecodeRuneInString(text[i:])
			space = isSpaceRune(r)
		}
		if space {
			flush(i)
		} else if start < 0 {
			start = i
		}
		i += size
	}
	flush(len(text))
	return buf
}

func isSpaceRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v'
	}
	return unicode.IsSpace(r) || r == '\u200b' || r == '\ufeff'
}

// isCJK reports whether r belongs to a script written without spaces.
func isCJK(r rune) bool {
	switch {
	case r < 0x2E80:
		return false
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3040 && r <= 0x30FF, r >= 0xAC00 && r <= 0xD7A3:
		return true // the common Han, kana and Hangul blocks, without a table search
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// spread8[b] places bit i of b in byte i of the result, so that 8 bit
// counters can be summed with one 64-bit addition.
var spread8 = func() (t [256]uint64) {
	for b := 0; b < 256; b++ {
		for i := 0; i < 8; i++ {
			if b&(1<<i) != 0 {
				t[b] |= 1 << (8 * i)
			}
		}
	}
	return t
}()

// simAccumulator counts, per bit position, how many features had the bit
// set. Counts live in byte lanes and are flushed before they can overflow.
type simAccumulator struct {
	lanes   [8]uint64
	pending int
	counts  [64]int32
	total   int32
}

func (a *simAccumulator) add(h uint64) {
	for i := 0; i < 8; i++ {
		a.lanes[i] += spread8[byte(h>>(8*i))]
	}
	a.pending++
	a.total++
	if a.pending == 255 {
		a.flush()
	}
}

func (a *simAccumulator) flush() {
	for i := 0; i < 8; i++ {
		l := a.lanes[i]
		for j := 0; j < 8; j++ {
			a.counts[8*i+j] += int32(byte(l >> (8 * j)))
		}
		a.lanes[i] = 0
	}
	a.pending = 0
}

func (a *simAccumulator) sum() uint64 {
	a.flush()
	var out uint64
	for i := 0; i < 64; i++ {
		// set in more than half of the votes
		if 2*a.counts[i] > a.total {
			out |= 1 << i
		}
	}
	return out
}

// simState is the feature extractor of SimHash (a struct with methods
// rather than closures, so the hot loop keeps its state in registers).
type simState struct {
	acc      simAccumulator
	word     uint64
	wordLen  int
	prevWord uint64
	words    int
	prevCJK  rune
	cjkRun   int
}

func (s *simState) flushWord() {
	if s.wordLen == 0 {
		return
	}
	if s.words > 0 {
		s.acc.add(mix64(s.prevWord*0x9e3779b97f4a7c15 ^ s.word))
	}
	s.prevWord = s.word
	s.words++
	s.word, s.wordLen = fnvOffset, 0
}

func (s *simState) endCJK() {
	if s.cjkRun == 1 {
		s.acc.add(mix64(uint64(s.prevCJK) | 1<<40))
	}
	s.prevCJK, s.cjkRun = -1, 0
}

// SimHash computes the 64-bit SimHash of decoded text (0 for text without
// words).
func SimHash(text string) uint64 {
	s := simState{word: fnvOffset, prevCJK: -1}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
				if s.cjkRun > 0 {
					s.endCJK()
				}
				s.word = (s.word ^ uint64(c)) * fnvPrime
				s.wordLen++
				continue
			}
			s.flushWord()
			if s.cjkRun > 0 {
				s.endCJK()
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case isCJK(r):
			s.flushWord()
			if s.prevCJK >= 0 {
				s.acc.add(mix64(uint64(s.prevCJK)<<21 | uint64(r) | 1<<42))
			}
			s.prevCJK = r
			s.cjkRun++
		case isWordRune(r):
			if s.cjkRun > 0 {
				s.endCJK()
			}
			s.word = (s.word ^ uint64(unicode.ToLower(r))) * fnvPrime
			s.wordLen++
		default:
			s.flushWord()
			if s.cjkRun > 0 {
				s.endCJK()
			}
		}
	}
	s.flushWord()
	if s.cjkRun > 0 {
		s.endCJK()
	}
	if s.words == 1 && s.acc.total == 0 {
		s.acc.add(mix64(s.prevWord))
	}
	if s.acc.total == 0 {
		return 0
	}
	return s.acc.sum()
}

// HammingDistance counts the differing bits of two simhashes.
func HammingDistance(a, b uint64) int {
	return bits.OnesCount64(a ^ b)
}

// NearDupIndex records the content fingerprints of stored pages in Badger
// and answers whether a new page duplicates one of them. Safe for concurrent
// use: claims and releases are serialised in-process, because Badger's
// conflict detection does not see phantom inserts into the band ranges and
// because the band counts must follow the commits. It must be the only
// writer of the "c:x/", "c:n/" and "c:nu/" keys of its db while it is open.
type NearDupIndex struct {
	db          *badger.DB
	maxDistance int
	mu          sync.Mutex
	bands       *bandCounts // guarded by mu; nil when near duplicates are not searched
}

// NewNearDupIndex returns an index over db. maxDistance is the largest
// Hamming distance considered a near duplicate (3 is the usual choice; the
// 4-band layout guarantees finding every match up to 3); a negative value
// disables near-duplicate detection (exact only). It reads every band key
// of db to count them.
func NewNearDupIndex(db *badger.DB, maxDistance int) (*NearDupIndex, error) {
	n := &NearDupIndex{db: db, maxDistance: maxDistance}
	if maxDistance < 0 {
		return n, nil
	}
	bands, err := loadBandCounts(db)
	if err != nil {
		return nil, fmt.Errorf("near-dup index: %w", err)
	}
	n.bands = bands
	return n, nil
}

// bandCounts counts, per band and band value, the "c:n/" keys holding
// that value, so that a claim seeks only into bands with entries. A count
// that reaches its maximum stays there: it no longer knows how many keys
// it stands for, so removing one must not bring it down.
type bandCounts [4][1 << 16]uint8

// loadBandCounts counts the band keys of db.
func loadBandCounts(db *badger.DB) (*bandCounts, error) {
	counts := new(bandCounts)
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefixNear})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()[len(prefixNear):]
			if len(k) < 3 || k[0] >= 4 {
				continue // findNear never seeks there
			}
			counts.add(int(k[0]), binary.BigEndian.Uint16(k[1:]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count band keys: %w", err)
	}
	return counts, nil
}

func (c *bandCounts) has(band int, value uint16) bool { return c[band][value] != 0 }

func (c *bandCounts) add(band int, value uint16) {
	if c[band][value] != math.MaxUint8 {
		c[band][value]++
	}
}

func (c *bandCounts) remove(band int, value uint16) {
	if v := c[band][value]; v != 0 && v != math.MaxUint8 {
		c[band][value]--
	}
}

func exactKey(h [16]byte) []byte {
	k := make([]byte, 0, len(prefixExact)+16)
	return append(append(k, prefixExact...), h[:]...)
}

func nearURLKey(url string) []byte {
	k := make([]byte, 0, len(prefixNearURL)+len(url))
	return append(append(k, prefixNearURL...), url...)
}

func bandValue(sim uint64, band int) uint16 { return uint16(sim >> (16 * band)) }

func nearBandPrefix(sim uint64, band int) []byte {
	k := make([]byte, 0, len(prefixNear)+3+8+64)
	k = append(k, prefixNear...)
	k = append(k, byte(band))
	return binary.BigEndian.AppendUint16(k, bandValue(sim, band))
}

// canonicalBefore reports whether a is the canonical copy rather than b
// when both have the same content: the shorter URL (mirrors and archives
// add path prefixes and longer host names; Google counts URL simplicity
// among its canonicalisation signals), then the first in byte order, so
// that the choice is total and independent of crawl order.
func canonicalBefore(a, b string) bool {
	return len(a) < len(b) || len(a) == len(b) && a < b
}

func nearKey(sim uint64, band int, url string) []byte {
	k := nearBandPrefix(sim, band)
	k = binary.BigEndian.AppendUint64(k, sim)
	return append(k, url...)
}

// Claim records (exact, sim) for url, a page in language lang, unless
// another url holds the same exact hash, or a simhash within maxDistance
// and the same language, and is the canonical copy of the two
// (canonicalBefore); then it returns that url as dupOf and records
// nothing. A url that is the canonical copy takes the exact hash over (the
// earlier holder stays stored: it was not a duplicate when it came), so
// which copy is kept does not depend on which was crawled first.
// Re-claiming with the same url and fingerprints is idempotent;
// re-claiming with new fingerprints replaces the old ones.
func (n *NearDupIndex) Claim(ctx context.Context, url, lang string, exact [16]byte, sim uint64) (dupOf string, err error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if url == "" {
		return "", fmt.Errorf("near-dup claim: empty url: %w", ErrBadURL)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var change bandChange
	for attempt := 0; attempt < 5; attempt++ {
		dupOf = ""
		change = bandChange{}
		err = n.db.Update(func(txn *badger.Txn) error {
			want := make([]byte, 24, 24+len(lang))
			copy(want, exact[:])
			binary.BigEndian.PutUint64(want[16:], sim)
			want = append(want, lang...)
			old, err := getValue(txn, nearURLKey(url))
			if err != nil {
				return err
			}
			if old != nil {
				if bytes.Equal(old, want) {
					return nil
				}
				if err := n.deleteEntries(txn, url, old, &change); err != nil {
					return err
				}
			}
			holder, err := getValue(txn, exactKey(exact))
			if err != nil {
				return err
			}
			if holder != nil && string(holder) != url && !canonicalBefore(url, string(holder)) {
				dupOf = string(holder)
				return nil
			}
			// A zero simhash means "no words": nothing to compare.
			if n.maxDistance >= 0 && sim != 0 {
				d, err := n.findNear(txn, url, lang, sim)
				if err != nil {
					return err
				}
				if d != "" && !canonicalBefore(url, d) {
					dupOf = d
					return nil
				}
			}
			if err := txn.Set(exactKey(exact), []byte(url)); err != nil {
				return err
			}
			change.added, change.addedSim = true, sim
			for b := 0; b < 4; b++ {
				if err := txn.Set(nearKey(sim, b, url), nil); err != nil {
					return err
				}
			}
			return txn.Set(nearURLKey(url), want)
		})
		if !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	n.countBandChange(change, err == nil)
	if err != nil {
		return "", fmt.Errorf("near-dup claim %s: %w", url, err)
	}
	return dupOf, nil
}

// findNear scans the bands of sim that have entries for another url of
// language lang within maxDistance, returning the closest.
func (n *NearDupIndex) findNear(txn *badger.Txn, url, lang string, sim uint64) (string, error) {
	best, bestDist := "", n.maxDistance+1
	// One iterator for all bands: opening one gathers an iterator per
	// memtable and table.
	var it *badger.Iterator
	defer func() {
		if it != nil {
			it.Close()
		}
	}()
	for b := 0; b < 4; b++ {
		if !n.bands.has(b, bandValue(sim, b)) {
			continue
		}
		if it == nil {
			it = txn.NewIterator(badger.IteratorOptions{Prefix: prefixNear})
		}
		prefix := nearBandPrefix(sim, b)
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			k := it.Item().Key()
			if len(k) < len(prefix)+8 {
				continue
			}
			other := binary.BigEndian.Uint64(k[len(prefix):])
			otherURL := k[len(prefix)+8:]
			if string(otherURL) == url {
				continue
			}
			d := HammingDistance(sim, other)
			if d > bestDist || d == bestDist && (best == "" || string(otherURL) >= best) {
				continue
			}
			rev, err := getValue(txn, nearURLKey(string(otherURL)))
			if err != nil {
				return "", err
			}
			if len(rev) < 24 || string(rev[24:]) != lang {
				continue
			}
			best, bestDist = string(otherURL), d
		}
	}
	return best, nil
}

// bandChange is what one transaction did to the band keys: it deleted the
// keys of removedSim in the bands marked removed, and wrote the four keys
// of addedSim when added.
type bandChange struct {
	removedSim uint64
	removed    [4]bool
	addedSim   uint64
	added      bool
}

// countBandChange brings the band counts in line with a transaction's
// change. New keys are counted whether or not the transaction committed,
// deleted ones uncounted only if it did, so a count is never below the
// number of keys, even when a failed commit leaves its outcome unknown.
func (n *NearDupIndex) countBandChange(change bandChange, committed bool) {
	if n.bands == nil {
		return
	}
	for b := 0; b < 4; b++ {
		if committed && change.removed[b] {
			n.bands.remove(b, bandValue(change.removedSim, b))
		}
		if change.added {
			n.bands.add(b, bandValue(change.addedSim, b))
		}
	}
}

// deleteEntries removes url's entries described by a reverse value,
// noting in change the band keys it found and deleted.
func (n *NearDupIndex) deleteEntries(txn *badger.Txn, url string, rev []byte, change *bandChange) error {
	if len(rev) < 24 {
		return txn.Delete(nearURLKey(url))
	}
	var exact [16]byte
	copy(exact[:], rev[:16])
	sim := binary.BigEndian.Uint64(rev[16:])
	holder, err := getValue(txn, exactKey(exact))
	if err != nil {
		return err
	}
	if string(holder) == url {
		if err := txn.Delete(exactKey(exact)); err != nil {
			return err
		}
	}
	change.removedSim = sim
	for b := 0; b < 4; b++ {
		key := nearKey(sim, b, url)
		if n.bands != nil {
			// Uncount only keys that exist: the fingerprints given to
			// Release may not be the stored ones.
			_, err := txn.Get(key)
			switch {
			case err == nil:
				change.removed[b] = true
			case !errors.Is(err, badger.ErrKeyNotFound):
				return err
			}
		}
		if err := txn.Delete(key); err != nil {
			return err
		}
	}
	return txn.Delete(nearURLKey(url))
}

// Release forgets url's fingerprints (page deleted or handed off). The
// recorded fingerprints are used when present; exact and sim are used
// otherwise. Releasing an unknown url is a no-op.
func (n *NearDupIndex) Release(ctx context.Context, url string, exact [16]byte, sim uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var change bandChange
	err := n.db.Update(func(txn *badger.Txn) error {
		change = bandChange{}
		rev, err := getValue(txn, nearURLKey(url))
		if err != nil {
			return err
		}
		if rev == nil {
			rev = make([]byte, 24)
			copy(rev, exact[:])
			binary.BigEndian.PutUint64(rev[16:], sim)
		}
		return n.deleteEntries(txn, url, rev, &change)
	})
	n.countBandChange(change, err == nil)
	if err != nil {
		return fmt.Errorf("near-dup release %s: %w", url, err)
	}
	return nil
}

// getValue returns a copy of the value, nil when the key is absent.
func getValue(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}
