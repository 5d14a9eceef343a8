// Package recording reads and writes gpurr recordings, format v1.
//
// A recording is a directory. Each recorded process writes its own
// subdirectory holding events.gpurr, an append-only file of checksummed,
// zstd-compressed frames whose payloads are recordingpb.Batch messages.
// Module images are stored once, content-addressed, in the modules/ folder
// shared by all processes of the recording. docs/format.md documents every
// file and field.
//
// Readers are total: any bytes yield either the records they hold or an
// error naming the file and the problem. A file cut short (the program was
// killed) reads up to its last whole frame and is marked truncated.
//
// Records refer to each other by id; Links and Join follow the references.
// Join pairs each kernel execution on the GPU with the launch call that
// ran it while a recording streams by, in bounded memory
// (Data.JoinKernels does it for a recording read whole); Links resolves
// kernel, callstack and allocation ids, leads a graph replay's kernel to
// the launch that captured it, and memory states to their launch.
package recording
