// Package manifest writes and reads gpurr manifests, and verifies a
// recording against one: the deterministic-run contract of a known-good
// run (gpurr manifest, gpurr verify).
//
// A manifest lists, for every launch of every process of a recording made
// with memory capture, the kernel's identity, the launch's stream and the
// gpurr-h128 hash of each region after it ran, with the hash of each of
// the region's chunks. It is one JSON document, written one launch per
// line in launch order, so it can be read whole (jq, json.load) or
// streamed; the same recording always gives the same bytes.
// docs/manifest.md specifies it.
//
// A manifest holds hashes, not bytes. Chunk hashes name chunks in the
// content-addressed chunk store of the recording the manifest was made
// from (its path is in the header), so verify shows the expected bytes of a
// differing chunk when that recording (or the one verified) holds them.
//
// Verify aligns the recording's launches with the manifest's the way
// package diff aligns two runs, reducing the manifest to a diff.Run.
package manifest

import (
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/gpurr/gpurr/recording"
)

// Format and Version identify a manifest. A reader rejects another major
// version; fields added within version 1 are ignored by older readers.
const (
	Format  = "gpurr-manifest"
	Version = 1
	Hash    = "gpurr-h128" // docs/hash.md
)

// Header is the manifest's first line, up to its processes.
type Header struct {
	Format    string `json:"format"`
	Version   int    `json:"version"`
	Hash      string `json:"hash"`
	Recording string `json:"recording"` // absolute path of the recording it was made from
}

// Process describes one process of the recording; its launches follow.
type Process struct {
	Name       string   `json:"process"` // directory name inside the recording, e.g. "host-1234"
	Rank       *int32   `json:"rank,omitempty"`
	Argv       []string `json:"argv"`
	Memory     string   `json:"memory"`      // hash | snapshot: how it was recorded
	ChunkBytes uint32   `json:"chunk_bytes"` // bytes per chunk hash
	Complete   bool     `json:"complete"`    // the recording was closed normally
	// WriteSets is how the recording carried regions rather than hash them (format 1.11,
	// MemoryConfig.write_sets): proved, learned or all; "" before write sets.
	WriteSets string   `json:"write_sets,omitempty"`
	Kernels   []Kernel `json:"kernels"` // every kernel its launches name, by identity
	// StreamUnits says how verify pairs streams: stream k (Launch.Stream, numbered in order of
	// first use) is aligned as diff's stream StreamUnits[k], numbered by the thread it belongs
	// to (diff.Threads). Absent in manifests made before it: stream k is aligned as k, and
	// the run verified is numbered in order of first use too (diff.Run.NumberByFirstUse).
	StreamUnits []int `json:"stream_units,omitempty"`
}

// Kernel names a kernel identity.
type Kernel struct {
	Identity string `json:"identity"` // 16 hex digits
	Name     string `json:"name"`     // demangled where possible
}

// Launch is one launch and the memory after it.
type Launch struct {
	Seq      uint64 `json:"seq"`      // launch sequence number in the recording
	Stream   int    `json:"stream"`   // streams numbered in order of first use
	Identity string `json:"identity"` // the kernel's identity, 16 hex digits
	After    *State `json:"after,omitempty"`

	identity uint64
}

// State is the memory after a launch: its regions in the launch's order.
type State struct {
	Snapshot bool     `json:"snapshot"` // the recording stores these chunks' bytes
	Regions  []Region `json:"regions"`
}

// Region is one region's size and hashes.
type Region struct {
	Size uint64 `json:"size"`
	// Unknown: the region's state was carried from a state the recording lost (write sets,
	// format 1.11): it has no hashes, and verify compares it with none.
	Unknown bool     `json:"unknown,omitempty"`
	Hash    string   `json:"hash,omitempty"` // 32 hex digits; absent when unknown
	Chunks  []string `json:"chunks"`         // 32 hex digits each, chunk 0 first
	// Owner names the communication library that made the region's memory for its own use
	// (Allocation.owner: nccl, ...), which verify leaves out unless asked; absent for the
	// program's memory.
	Owner string `json:"owner,omitempty"`

	hash   []byte
	chunks [][]byte
}

// ID is the launch's kernel identity as a number.
func (l *Launch) ID() uint64 { return l.identity }

// RegionHash is the region's hash as bytes.
func (r *Region) RegionHash() []byte { return r.hash }

// ChunkHashes are the region's chunk hashes as bytes, chunk 0 first.
func (r *Region) ChunkHashes() [][]byte { return r.chunks }

func identityText(id uint64) string { return fmt.Sprintf("%016x", id) }

func parseIdentity(s string) (uint64, error) {
	if len(s) != 16 {
		return 0, fmt.Errorf("identity %.40q is not 16 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("identity %q is not 16 hex digits", s)
	}
	return v, nil
}

func parseHash(what, s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != recording.HashBytes {
		return nil, fmt.Errorf("%s %.40q is not %d hex digits", what, s, 2*recording.HashBytes)
	}
	return b, nil
}

// check validates a launch's fields and keeps their binary forms.
func (l *Launch) check() error {
	if l.Seq == 0 {
		return fmt.Errorf("launch has no seq")
	}
	if l.Stream < 0 {
		return fmt.Errorf("launch %d: stream %d", l.Seq, l.Stream)
	}
	id, err := parseIdentity(l.Identity)
	if err != nil {
		return fmt.Errorf("launch %d: %v", l.Seq, err)
	}
	l.identity = id
	if l.After == nil {
		return nil
	}
	for i := range l.After.Regions {
		r := &l.After.Regions[i]
		if r.Unknown {
			if r.Hash != "" || len(r.Chunks) > 0 {
				return fmt.Errorf("launch %d region %d: unknown, but with hashes", l.Seq, i)
			}
			continue
		}
		if r.hash, err = parseHash("hash", r.Hash); err != nil {
			return fmt.Errorf("launch %d region %d: %v", l.Seq, i, err)
		}
		r.chunks = make([][]byte, len(r.Chunks))
		for k, c := range r.Chunks {
			if r.chunks[k], err = parseHash("chunk hash", c); err != nil {
				return fmt.Errorf("launch %d region %d chunk %d: %v", l.Seq, i, k, err)
			}
		}
	}
	return nil
}
