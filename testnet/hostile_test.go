package testnet

import (
	"testing"

	"sou/testnet/attack"
)

// TestHostileNetwork is the CI size of `sou testnet run --hostile`: one
// attacker running every class beside three honest nodes, through the
// crawl and the query phase. The honest nodes crawl every page of the
// hosts they own, serve no forged page, count no phantom, do not crash,
// and agree on the top 10; every class was tried, and the honest nodes
// counted what they refused.
func TestHostileNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testnet with an attacker")
	}
	rep := runReport(t, RunConfig{Nodes: 3, Hostile: 1, Hosts: 30, Pages: 900, Seed: 11, Queries: 20})
	if !rep.OK {
		t.Fatalf("report not ok: %v", rep.Failures)
	}
	h := rep.Hostile
	if h == nil {
		t.Fatal("no hostile section")
	}
	if h.AttackersJoined != 1 || h.PoisonedPages != 0 || h.PhantomMembers != 0 || h.HonestCrashes != 0 {
		t.Fatalf("hostile section: %+v", h)
	}
	for _, c := range attack.Classes {
		if h.Attacks[c].Tried == 0 && c != attack.ForgedAnswers {
			t.Errorf("class %s never tried", c)
		}
	}
	if h.ForgedURLs == 0 {
		t.Error("the attacker forged no page: the poison class did not run")
	}
	r := h.Refused
	if r.NonMemberStreams == 0 || r.Malformed == 0 || r.ItemsRefused == 0 || r.URLsFiltered == 0 || r.HeartbeatsIgnored+r.MembersRefused+r.CandidateDialsFailed == 0 {
		t.Errorf("the honest nodes counted too little as refused: %+v", r)
	}
	for i, mb := range h.HonestRSSPeakMB {
		if mb <= 0 {
			t.Errorf("honest node %d: no RSS figure", i)
		}
	}
}
