// Package clusterpki is the installation's certificate authority for the
// links between API servers and node daemons: mutual TLS in which a node
// answers only a caller holding the authority's certificate for an API
// server, and an API server talks only to the node it meant.
//
// The authority is made by the first process of an installation and kept
// in the store (Store.InitValue), so a node needs nothing but the store's
// address to get its certificate: whoever can read the store can mint
// certificates, so the store's credentials are the installation's root of
// trust. Leaf keys never leave the process that made them.
package clusterpki
