// Package layer stores template layers on disk, each once by the digest
// of its archive, and extracts those archives, which are untrusted: a
// sandbox's root made the upper layer of a snapshot, and an image layer
// is anyone's.
//
// # Layout
//
//	<cacheDir>/templates/layers/         0700 root: nothing beneath it is reachable by anyone else
//	    sha256/<64 hex>/fs/              the layer, in overlayfs's format; never written once complete
//	    sha256/<64 hex>/.complete        JSON Info; its presence says the layer is whole
//	    tmp/import-*/, tmp/remove-*/     imports in progress and removals; Open removes them
//
// An import extracts into tmp, syncs the file system, writes .complete and
// renames the directory to its digest's name: a layer appears whole or
// not at all. If the digest is stored already the new copy is discarded.
// Remove renames the layer into tmp before deleting it.
//
// # API
//
// Open(cacheDir) opens the store; Import stores a layer and returns its
// Info; Dir(digest) is the fs directory of a complete layer (the digest
// checked with template.ValidDigest before any path is made of it; a layer
// not stored is fs.ErrNotExist); Has, Stat, List, Usage (the SizeBytes of
// all) and Remove. Root(target, lowers) stacks directories into a
// template's root. Import's Limits of 0 are no bound: the caller always
// gives the account's. When the reader Import reads from fails (an export
// cut short), the error is ErrMalformed wrapping the reader's error, so
// errors.Is finds either.
//
// # The archive
//
// Import reads an uncompressed tar (a gzip'd image layer is the caller's
// to decompress, ociimage's) on top of tarx.Reader, whose Next checks
// every name (no "..", no absolute name) and counts every header and
// announced byte. The digest is the sha256 of the stream as read, its
// end-of-archive padding included (at most 1 MiB may follow the archive's
// end): for an image layer, its diff ID. On top of tarx it holds:
//
//   - Every entry is made beneath the layer's directory with *at calls on
//     a parent directory checked component by component to be a real
//     directory, never a symbolic link: nothing is written through a link
//     an earlier entry made, and nothing outside the layer is touched.
//   - Owners (numeric uid and gid), permission bits with setuid, setgid
//     and sticky, and modification times are kept as the archive has them,
//     for files, directories, symbolic links and whiteouts. A setuid file
//     gains nothing on the host: the layers are under 0700 root
//     directories and Root mounts them nosuid,nodev.
//   - Symbolic links are stored as links with their target as written,
//     never followed on the host.
//   - A hard link links only to a regular file or a symbolic link made
//     earlier in the same layer (ErrUnsafe otherwise).
//   - Whiteouts are overlayfs's: a character device 0:0 for a removed
//     name, the xattr trusted.overlay.opaque=y on an opaque directory.
//     Overlay format: char 0:0 entries are whiteouts, the PAX record
//     SCHILY.xattr.trusted.overlay.opaque=y on a directory makes it
//     opaque. OCI format: .wh.NAME becomes a whiteout of NAME (unless an
//     entry of the same layer is at NAME: an OCI whiteout hides only lower
//     layers), .wh..wh..opq marks its directory opaque (the layer's root
//     too, which Root honours), other .wh..wh. names (aufs's bookkeeping)
//     are skipped, and a whiteout of "", "." or "..", or an entry beneath
//     a .wh. name, is ErrUnsafe.
//   - Every other device node is refused (ErrUnsafe), in both formats;
//     in the OCI format a char 0:0 is a device like any other. FIFOs are
//     dropped (nothing a template needs; a sandbox may leave one).
//   - Xattrs: only trusted.overlay.opaque=y on a directory, and only as
//     the format says; every other (user.*, security.capability, other
//     trusted.overlay.* such as redirect or metacopy) is dropped. File
//     capabilities are dropped although they would gain nothing on the
//     host: gVisor honours them at exec as Linux does, and a file whose
//     capabilities have the effective bit but are not all in the
//     sandbox's bounding set cannot be executed at all (EPERM). runsc
//     takes CAP_NET_RAW out of that set (no --net-raw), so an image's
//     ping, cap_net_raw+ep, would not start; without them it runs, as
//     root (an image's default user) holds the sandbox's capabilities
//     anyway. (e2e TestTemplateFileCapabilities.)
//   - Duplicate entries: the last wins, except that nothing replaces a
//     directory an earlier entry made (ErrDestination); a directory
//     entry onto an earlier non-directory replaces it, and onto a
//     whiteout becomes an opaque directory (it replaced a lower one), as
//     does a whiteout that a later name is beneath.
//   - Bounds (Limits): headers and the directories made for names that
//     have no entry of their own (MaxEntries), and regular files' bytes
//     (MaxBytes, as announced, before anything of the entry is written,
//     and as written) stop the import with ErrTooLarge. So a layer takes
//     at most MaxBytes plus an inode (and a block, for a directory or a
//     long link) per entry. One entry over MaxEntrySize, a truncated body,
//     a header that does not parse, an owner out of range, a name or link
//     target the file system finds too long, too many links to one file,
//     an empty stream, a stream whose last block read is not a zero
//     block (an archive cut between two entries, which archive/tar takes
//     as ended) or over 1 MiB after the archive's end is ErrMalformed. Any error removes all the import made.
//
// The errors refusing an archive are *tarx.Error, errors.Is one of
// tarx.ErrUnsafe, tarx.ErrTooLarge, tarx.ErrMalformed, tarx.ErrDestination
// (the caller maps them to its stable codes: all invalid_request, or
// ErrTooLarge to a quota code); any other error is ctx's or the host's.
//
// # Mounting
//
// Root(target, lowers) gives a template's read-only root: the lower
// directories top first (the layers' Dir from the newest down, then the
// base's rootfs). One directory is used as it is; more are an overlay
// mounted on target, nosuid,nodev, naming the directories by descriptor
// when their paths would not fit the mount's one page (33 lowers under a
// deep cache directory).
//
// The package imports the standard library, x/sys/unix, tarx and template.
package layer
