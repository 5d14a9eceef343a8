// Package chunkstore is the content-addressed store of device memory
// chunks in a process recording: the agent's snapshots of GPU memory are
// cut into chunks of at most 64 KiB (memhash.ChunkSize), each named by its
// gpurr-h128 hash, and a chunk whose hash is stored already is not stored
// again.
//
// The store is the folder chunks/ of a process recording directory:
// append-only pack files (pack-000001.pack, ...) of checksummed entries,
// each compressed on its own (S2 by default, raw when that saves little),
// and an index of every entry sorted by hash, written when the Writer
// closes. A store whose writer was killed has no index, or a stale one: the
// Reader then rebuilds it from the packs and ignores an entry cut short at
// the end. docs/chunkstore.md specifies the files.
//
// A Writer takes chunks from many goroutines at once and compresses them
// on a bounded pool of workers; one goroutine appends to the packs. A
// Reader checks every chunk it returns against its checksum and its hash.
// Readers are total: any bytes in the files yield chunks or one-line
// errors that name the pack and offset, never a panic.
package chunkstore
