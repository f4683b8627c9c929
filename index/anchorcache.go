package index

import "hash/maphash"

// anchorSlots is the size of the table of recorded anchors: 2 MiB,
// without pointers, so the collector does not scan it. A site's
// navigation repeats a few hundred (target, text) pairs on every page, and
// a slot lost to another pair only costs the read it would have saved.
const anchorSlots = 1 << 18

// recordedAnchors remembers (URL, anchor text) pairs recorded under i:a:,
// so that AddAnchorsBatch does not read the anchors of a URL when every
// anchor a page gives it is recorded already: on a documentation site most
// links are navigation, the same text to the same pages from every page,
// and each cost a Badger read that found nothing to add.
//
// It is a direct-mapped table of the pairs' 64-bit hashes: a slot keeps
// the last pair hashed to it. A pair may be forgotten (then the read
// happens), but a pair the table holds is recorded, because every writer
// of i:a: keys keeps it so under anchorMu: AddAnchorsBatch adds pairs once
// they are committed and forgets a text it drops to keep a URL's cap, and
// Delete forgets the pairs of the key it deletes.
// A false hit needs two pairs with equal 64-bit hashes. Guarded by
// anchorMu.
type recordedAnchors struct {
	seed  maphash.Seed
	slots []uint64
}

func newRecordedAnchors() *recordedAnchors {
	return &recordedAnchors{seed: maphash.MakeSeed(), slots: make([]uint64, anchorSlots)}
}

// hash is the pair's hash; 0 marks an empty slot, so it is never one.
func (r *recordedAnchors) hash(u, anchor string) uint64 {
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(u)
	h.WriteByte(0)
	h.WriteString(anchor)
	return max(h.Sum64(), 1)
}

func (r *recordedAnchors) holds(h uint64) bool { return r.slots[h%anchorSlots] == h }

func (r *recordedAnchors) add(h uint64) { r.slots[h%anchorSlots] = h }

func (r *recordedAnchors) forget(h uint64) {
	if r.slots[h%anchorSlots] == h {
		r.slots[h%anchorSlots] = 0
	}
}
