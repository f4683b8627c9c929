// Package node wires one sou node: configuration, lifecycle, the Badger
// database shared by crawl, index and p2p, the HTTP API and web UI, and
// metrics. It is the only package that connects crawl, index, search and p2p.
//
// # Joins and handoff manifests
//
// With XOR ownership a join moves hosts only to the newcomer, and only from
// the members that owned them, which are the newcomer's XOR neighbours. So
// a member sends a joiner a handoff manifest (the hosts it is about to hand
// over) only when it has hosts for it or when it is among the joiner's 16
// closest members by its own, settled view, and a joiner waits (at most
// 15 s) for the manifests of its 8 closest members before it crawls
// anything; a host named in any manifest waits for its handoff. Until
// issue 8 every member sent every joiner a manifest and every joiner
// awaited all of them: N² messages and connections when a network starts,
// which kept a 128-node simulation from coming up. The reasoning, the
// measurement behind the sizes and what a view that has not settled does
// are in settling (ownership.go).
//
// Badger key prefixes (all under "n:"): documented in the files that own them.
package node
