// Package node wires one sou node: configuration, lifecycle, the Badger
// database shared by crawl, index and p2p, the HTTP API and web UI, and
// metrics. It is the only package that connects crawl, index, search and p2p.
//
// Badger key prefixes (all under "n:"): documented in the files that own them.
package node
