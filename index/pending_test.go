package index

import (
	"slices"
	"testing"
)

// handDoc builds a docPostings by hand: terms with their (field,
// position) tokens in emission order.
func handDoc(toks []struct {
	term  string
	field int
	pos   uint32
}) *docPostings {
	dp := &docPostings{idx: map[string]int32{}}
	for _, t := range toks {
		dp.token(t.term, t.field, t.pos)
	}
	dp.encode()
	return dp
}

type tok = struct {
	term  string
	field int
	pos   uint32
}

func TestPendingIndexRoundTrip(t *testing.T) {
	docs := map[uint32][]tok{
		3:   {{"a", FieldTitle, 0}, {"b", FieldTitle, 1}, {"a", FieldBody, 20}, {"a", FieldBody, 20}, {"c", FieldURL, 40}},
		7:   {{"a", FieldBody, 5}, {"b", FieldBody, 6}},
		300: {{"b", FieldAnchor, 2}, {"a", FieldAnchor, 9}, {"a", FieldBody, 300}},
		301: {{"c", FieldBody, 1}},
	}
	// Expected per term: docs, TFs and positions.
	type post struct {
		doc uint32
		tf  [NumFields]uint32
		pos []uint32
	}
	want := map[string][]post{
		"a": {{3, [NumFields]uint32{1, 0, 1, 0}, []uint32{0, 20}}, {7, [NumFields]uint32{0, 0, 1, 0}, []uint32{5}}, {300, [NumFields]uint32{0, 1, 1, 0}, []uint32{9, 300}}},
		"b": {{3, [NumFields]uint32{1, 0, 0, 0}, []uint32{1}}, {7, [NumFields]uint32{0, 0, 1, 0}, []uint32{6}}, {300, [NumFields]uint32{0, 1, 0, 0}, []uint32{2}}},
		"c": {{3, [NumFields]uint32{0, 0, 0, 1}, []uint32{40}}, {301, [NumFields]uint32{0, 0, 1, 0}, []uint32{1}}},
	}
	check := func(name string, p *pendingIndex, skip func(uint32) bool, after uint32, hasAfter bool) {
		t.Helper()
		for term, posts := range want {
			li, ok := p.terms[term]
			if !ok {
				t.Fatalf("%s: term %q missing", name, term)
			}
			var got postingList
			if err := decodePending(&p.lists[li], &got, skip, after, hasAfter); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var exp []post
			for _, ps := range posts {
				if !skip(ps.doc) && !(hasAfter && ps.doc <= after) {
					exp = append(exp, ps)
				}
			}
			if len(got.docs) != len(exp) {
				t.Fatalf("%s: term %q: %d docs, want %d", name, term, len(got.docs), len(exp))
			}
			for i, e := range exp {
				if got.docs[i] != e.doc || got.tfs[i] != e.tf || !slices.Equal(got.positions(i), e.pos) {
					t.Errorf("%s: term %q doc %d: got %d %v %v, want %+v", name, term, i, got.docs[i], got.tfs[i], got.positions(i), e)
				}
			}
		}
	}
	none := func(uint32) bool { return false }
	one := newPendingIndex(0)
	for _, id := range []uint32{3, 7, 300, 301} {
		one.add(id, handDoc(docs[id]))
	}
	check("one batch", one, none, 0, false)
	check("deleted 7", one, func(id uint32) bool { return id == 7 }, 0, false)
	check("after 7", one, none, 7, true)

	// A failed flush puts its batch back in front of newer docs.
	older, newer := newPendingIndex(0), newPendingIndex(0)
	older.add(3, handDoc(docs[3]))
	older.add(7, handDoc(docs[7]))
	newer.add(300, handDoc(docs[300]))
	newer.add(301, handDoc(docs[301]))
	older.appendPending(newer)
	check("appended", older, none, 0, false)
	if len(older.docs) != 4 || older.docs[3].id != 301 {
		t.Errorf("docs after append: %+v", older.docs)
	}
}
