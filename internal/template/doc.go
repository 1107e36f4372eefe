// Package template is what a template is: a named, immutable root file
// system (a base image and layers over it, each stored once by content,
// internal/layer) and the defaults of the sandboxes made from it. It names
// templates (Ref), and says which records a store keeps (Template).
//
// It imports the standard library only.
package template
