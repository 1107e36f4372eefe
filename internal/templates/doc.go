// Package templates is the template library of a server: it resolves the
// templates creates name, turns a running sandbox's file system into a
// template (Snapshot), imports OCI images (Import), lists and removes
// templates, and frees a removed template's layers once nothing uses it
// (Collect).
//
// A template's record lives in the store (store.Templates), its layers on
// this server's disk (internal/layer). A layer is written once, before the
// record that names it; Collect removes a layer only when no record names
// it, under the same lock as the writes, so a layer a record names is
// always whole on disk.
//
// It imports the domain (sandbox, template), the store and the layer
// store; never the API's wire types or the HTTP layer.
package templates
