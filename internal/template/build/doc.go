// Package build says what a template build is before anything runs: the
// build specification a client sends (Spec: a base, steps, the start and
// ready commands, the network of the build), the Dockerfile subset that
// parses into the same steps (ParseDockerfile), the shell command each step
// becomes (Step.Command, with every package name quoted as one word), and
// the content key of a step on its parent (CacheKey), with the hashes of
// the build-context files a copy step takes (HashContext).
//
// Everything here is pure: it parses, checks and hashes, and never runs a
// step. Every refusal is an *Error, the client's mistake, which the caller
// answers as invalid_request.
//
// It imports the standard library, internal/template and internal/envname
// only (deps_test.go).
package build
