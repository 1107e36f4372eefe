// Package clusterpki is the installation's certificate authority for the
// links between API servers and node daemons: mutual TLS in which a node
// answers only a caller holding the authority's certificate for an API
// server, and an API server talks only to the node it meant.
//
// Only API servers hold the authority. Its key is kept in the store
// sealed (AES-256-GCM) with a seal key that API servers keep outside the
// store (seal.go); a node, which has the store's credentials too, reads
// nothing there that signs. A node makes its own key, which never leaves
// its process, and asks for a certificate through its registry entry (a
// CSR); an API server issues one naming that entry's ID as a node and
// nothing else, writes it back, and issues it again at half its life
// (issue.go). The node keeps the authority's certificate it first saw in
// its data dir and accepts only certificates of that authority (node.go).
//
// The store stays a root of trust while nodes and API servers share its
// credentials: whoever can write it can add an admin key or change a
// node's entry. What this package keeps from a node is the authority's
// key, so that a node (or a copy of the store) cannot mint the API
// servers' identity or another node's.
package clusterpki
