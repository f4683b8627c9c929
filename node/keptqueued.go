package node

import (
	"hash/maphash"
	"sync"
)

// keptSlots is the size of the table of kept queued URLs: 1 MiB, without
// pointers, so the collector does not scan it. What repeats is a site's
// navigation, a few hundred URLs on every page; a slot lost to another
// URL only costs the write and replication it would have saved.
const keptSlots = 1 << 17

// keptQueued remembers the URLs whose queued key ("n:u/") this node wrote
// and its replicas hold, so that keepQueued does not write and replicate
// them again. Each page that is not indexed (a mirror's copy, a
// duplicate) keeps its links to this node's hosts as queued URLs, and a
// mirror's pages link to the same navigation as the pages they copy:
// nearly every such link is a URL kept before. Skipping it is safe
// because a kept URL stays known to a takeover: its queued key stays
// until a page or marker stored for the URL settles it, and from then on
// the marker or page tells of it.
//
// The one other way a queued key goes is forget, which deletes a host's
// keys; it calls reset, which empties the table and moves the
// generation, and keepQueued marks its URLs only if the generation it
// started under is still current, so a URL whose key a forget may have
// deleted is never taken for kept.
//
// It is a direct-mapped table of the URLs' 64-bit hashes: a slot holds
// the last URL hashed to it; a false hit needs two URLs with equal
// hashes.
type keptQueued struct {
	mu    sync.Mutex
	seed  maphash.Seed
	slots []uint64 // allocated by the first use
	gen   uint64
}

// fresh returns the URLs of urls the table does not hold, their hashes,
// and the generation to mark them under once they are kept.
func (k *keptQueued) fresh(urls []string) (out []string, hashes []uint64, gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.slots == nil {
		k.seed = maphash.MakeSeed()
		k.slots = make([]uint64, keptSlots)
	}
	for _, u := range urls {
		h := max(maphash.String(k.seed, u), 1) // 0 marks an empty slot
		if k.slots[h%keptSlots] == h {
			continue
		}
		out = append(out, u)
		hashes = append(hashes, h)
	}
	return out, hashes, k.gen
}

// mark records hashes (from fresh) as kept, unless reset ran since fresh
// returned gen.
func (k *keptQueued) mark(hashes []uint64, gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if gen != k.gen {
		return
	}
	for _, h := range hashes {
		k.slots[h%keptSlots] = h
	}
}

// reset forgets every URL: queued keys are being deleted.
func (k *keptQueued) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	clear(k.slots)
}
