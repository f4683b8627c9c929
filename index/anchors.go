package index

import (
	"cmp"
	"slices"
	"strings"
)

// A URL's recorded anchor texts (i:a:) are a canonical function of the set
// of texts it has been given, whatever order they came in: the
// maxAnchors first of them in anchorOrder, stored in that order. An owner
// and its replica receive a URL's anchors in different orders (an owner
// replicates concurrent batches in the order they finish, not the order
// it committed them), and keeping the first texts to arrive would leave
// the two with different anchor fields once a URL has more than
// maxAnchors, so that a takeover would change field statistics and with
// them every score. Ordering by a hash samples the texts evenly, where
// ordering by the text would favour texts that begin with digits or "A".

// anchorOrder orders anchor texts by anchorRank, then by the text.
func anchorOrder(a, b string) int {
	if c := cmp.Compare(anchorRank(a), anchorRank(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// anchorRank is the 64-bit FNV-1a hash of a text: fixed across processes
// and versions, since every node holding a URL must rank its texts alike.
func anchorRank(s string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// cleanAnchor is the text recorded for an anchor text as a page gives it
// ("" records nothing).
func cleanAnchor(a string) string {
	return strings.TrimSpace(strings.ToValidUTF8(truncUTF8(a, maxAnchorBytes), ""))
}

// sortAnchors puts recorded texts in anchorOrder. Texts recorded by a
// version that kept them in arrival order are read in the canonical order
// too, so that every node analyses a URL's anchors alike.
func sortAnchors(anchors []string) {
	if !slices.IsSortedFunc(anchors, anchorOrder) {
		slices.SortFunc(anchors, anchorOrder)
	}
}

// mergeAnchors adds cleaned texts to cur, a URL's recorded texts in
// anchorOrder, keeping the maxAnchors first, and reports whether the
// recorded set changed and which recorded texts it dropped to keep the
// cap.
func mergeAnchors(cur, given []string) (merged []string, changed bool, evicted []string) {
	for _, a := range given {
		i, found := slices.BinarySearchFunc(cur, a, anchorOrder)
		if found || i >= maxAnchors {
			continue
		}
		cur = slices.Insert(cur, i, a)
		if len(cur) > maxAnchors {
			if last := cur[maxAnchors]; last != a {
				evicted = append(evicted, last)
			}
			cur = cur[:maxAnchors]
		}
		changed = true
	}
	return cur, changed, evicted
}
