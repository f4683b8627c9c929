// Package peermsg holds the payloads nodes deliver to each other over
// p2p's acknowledged delivery (handoff, replication, pulls, manifests), and
// their codecs.
//
// Every payload is bytes from a peer, so every decoder is bounded and
// versioned: the first byte is the format version, every count and length
// is checked against a cap and against the bytes left before anything is
// allocated (p2p.Decoder), strings must be valid UTF-8, numbers finite and
// in range, and nothing may trail. A payload therefore costs its receiver
// about its own size in memory, and p2p caps that size per message. A
// decoding error wraps p2p.ErrMalformed, so p2p throttles the sender.
// Decoding says nothing about whether the sender may send it: node
// authorises every item by who sent it.
//
// The caps are about twice what an honest node produces (crawl's parser
// caps titles at 1 KiB, headings at 64 of 512 bytes, text at 1 MiB), so
// that nodes one version apart still understand each other.
//
// A pages message that carries analysed forms (Pages.Forms, what a replica
// indexes a page from instead of analysing it) is version 2, any other
// payload version 1: a node of version 1 refuses the forms' messages only.
// The forms themselves are opaque here; index decodes and checks them.
//
// Each decoder has a fuzz target with a committed corpus (testdata/fuzz).
package peermsg
