// Package testnet owns the test networks: the simulated web (sub-package
// simweb), the LAN launcher that runs real `sou node` processes on loopback,
// and the reports computed from what the simulated web saw.
package testnet
