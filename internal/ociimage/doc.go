// Package ociimage reads an OCI image into a template: from a file on the
// host (a docker save archive, an OCI image layout directory, or an OCI
// archive, a tar of a layout as skopeo's oci-archive writes; told apart by
// content, never by name) or from a registry (ReadRemote). Of an index it
// takes the linux/amd64 image.
//
// Each layer, bottom first, is handed uncompressed to the caller's
// ImportFunc (the layer store's import) as one stream: nothing is written
// to disk here, so a layer is written once. The same bytes are checked
// against the config's diff id, and every blob against its descriptor's
// size and digest, as they pass; a mismatch is ErrInvalid once the stream
// has ended, so the layer the ImportFunc stored (named by its own content)
// is simply not used. Bounds: MaxLayers layers (template.MaxLayers, less
// one for the platform layer), a MaxConfig config, MaxManifest manifests,
// indexes and manifest.json, nested indexes, an archive's entries, and
// 1 MiB for the image's /etc/passwd and /etc/group.
//
// The image's config gives the template's defaults (Defaults): Env, the
// working directory, the user, and Entrypoint then Cmd as the start
// command; nothing else.
//
// # The platform layer
//
// A sandbox of any image must let the agent run exec and files as the
// sandbox user (uid 1000, gid 1000, HOME /home/user, cwd /workspace, as
// internal/agent.DefaultConfig has them) and mount its own directories.
// The platform layer is one small tar the caller imports over the image's
// layers. It is made from what the layers held, read as they passed (the
// last entry of a name across the layers counts; whiteouts and opaque
// directories remove; a link is never followed and nothing is read from
// the host's disk), and it adds exactly:
//
//   - /etc/passwd: the image's own with "user:*:1000:1000:user:/home/user:/bin/sh"
//     appended when it has no entry named user; when the image has none,
//     or a link or anything but a plain file there, a new one of root and
//     that line. Its password field is "*", not "x": with "x" and no
//     /etc/shadow entry (which the layer may not add) pam_unix fails su's
//     and sudo's account check, as tried on the default image.
//   - /etc/group: likewise, "user:x:1000:" appended, or a new one of root
//     and user.
//   - /etc/sudoers.d/withruntime (0440), "user ALL=(ALL) NOPASSWD:ALL",
//     only when the image has sudo (/usr/bin/sudo or /bin/sudo) or an
//     /etc/sudoers.d directory; it works where the image's sudoers includes
//     /etc/sudoers.d, as Debian's, Ubuntu's, Fedora's and Alpine's do.
//   - /etc/ssl/certs/ca-certificates.crt: Options.CARoots, only when given
//     and the image has no CA bundle (none of that path,
//     /etc/pki/tls/certs/ca-bundle.crt and /etc/ssl/cert.pem).
//   - When absent: /workspace and /home/user (0755, owned by 1000:1000),
//     /home, /tmp (1777), /proc, /dev, /sys, /opt/withruntime and
//     /run/withruntime (the agent's and its socket's mount points),
//     /etc/hostname ("sandbox") and /etc/hosts (localhost and sandbox), as
//     the default image has them.
//
// It changes nothing else the image has: a directory it must name again to
// add below it (/etc, /home, ...) is written with the image's own owner,
// mode and time, and nothing is added below a name that the image has as
// a link or a file (which the new entry would replace). An existing
// /workspace, /home/user or account named user is left as the image has
// it. Its bytes depend only on the image (times are the epoch), so one
// image's platform layer is stored once.
//
// Errors about the image wrap ErrNotImage or ErrInvalid (the client's:
// invalid_request), a registry's ErrRegistry; the ImportFunc's and the
// context's come back as they were.
package ociimage
