// Package placement decides where each web host lives: which member
// crawls it, which hold its replicas, when it is handed to a member that
// joined, taken over from one that died, pulled from the members that
// hold it, and when a stored page counts as replicated.
//
// It is a state machine in the manner of etcd's raft. The caller, one
// goroutine, gives it events with the time (Step: membership changes,
// the crawler's hosts, what peers sent, the outcomes of actions, ticks),
// takes the actions it decided (Ready) and carries them out: all I/O is
// the caller's. It asks it questions between steps (MayCrawl, Allowed,
// Targets). The machine has no goroutines, locks or I/O; what must
// survive a restart is in Saved, which the caller keeps from the Save
// actions and hands back to New.
//
//	m := placement.New(placement.DefaultConfig(self, 2, space, joining, memberTimeout), saved, now)
//	m.Step(now, placement.Joined{Peer: p})
//	for _, a := range m.Ready() {
//		// send the manifest, hand off the host, ... then Step the outcome
//	}
//
// The decisions and their reasons are beside the state they keep:
// settling (joins and handoff manifests), hostTable (handoffs, roles,
// takeovers, pulls, hints), replication (targets, group commit, the
// outbox of members away) and Allowed (who may send what about a host).
// Every host has, once the views agree, exactly one member that may
// crawl it, and nothing it stored is fetched again elsewhere unless its
// request was in flight when a node was killed: TestModel checks both,
// with members joining, crashing and dying in thousands of orders.
package placement
