package kernels

import (
	_ "embed"
	"encoding/binary"
	"fmt"
)

//go:embed ptx/hash.ptx
var memcapPTX []byte

// MemcapPTX returns the PTX module of the memory-capture kernel
// (src/hash.cu), NUL-terminated as cuModuleLoadData wants PTX text. The
// slice is a copy.
func MemcapPTX() []byte { return append(append([]byte(nil), memcapPTX...), 0) }

// Memcap is gpurr_memcap(gpurr_job job): one block of 256 threads per
// chunk of every region of the job. It writes gpurr-h128 chunk and region
// hashes (docs/hash.md) to the job's result area and, for a snapshot job,
// copies the chunks whose hash differs from the region's shadow to
// staging. Layouts: Job, ResultLayout.
const Memcap = "gpurr_memcap"

// Limits and layout constants shared with src/hash.cu and the agent
// (internal/agent/memcap.h).
const (
	ChunkBytes       = 65536
	BlockThreads     = 256
	MaxJobRegions    = 48
	JobBytes         = 56 + MaxJobRegions*32 // sizeof(gpurr_job)
	ResultHeader     = 64                    // done (u64), transferred (u32), padding
	RegionCopyAll    = 1                     // gpurr_region.flags: ignore the shadow, copy every chunk
	resultDoneOffset = 0
	resultXferOffset = 8
)

// JobRegion is one region of a Job.
type JobRegion struct {
	Base, Size uint64
	Shadow     uint64 // device pointer to a hash per chunk, or 0
	FirstChunk uint32
	Flags      uint32
}

// Job is gpurr_job, the kernel's parameter.
type Job struct {
	Seq         uint64
	Out         uint64 // device address of the result area (mapped host memory)
	Staging     uint64 // device address of the staging area (snapshot), or 0
	Scratch     uint64 // device memory for one hash per chunk
	Counters    uint64 // two zeroed device uint32s
	TotalChunks uint32
	Snapshot    bool
	Regions     []JobRegion
}

// Chunks returns how many chunks a region of n bytes has.
func Chunks(n uint64) uint32 { return uint32((n + ChunkBytes - 1) / ChunkBytes) }

// NewJob lays out regions of the given sizes one after another.
func NewJob(sizes ...uint64) Job {
	var j Job
	for _, n := range sizes {
		j.Regions = append(j.Regions, JobRegion{Size: n, FirstChunk: j.TotalChunks})
		j.TotalChunks += Chunks(n)
	}
	return j
}

// Encode returns the job as the kernel's parameter bytes.
func (j Job) Encode() ([]byte, error) {
	if len(j.Regions) == 0 || len(j.Regions) > MaxJobRegions {
		return nil, fmt.Errorf("memcap job: %d regions (1 to %d)", len(j.Regions), MaxJobRegions)
	}
	b := make([]byte, 0, JobBytes)
	le := binary.LittleEndian
	for _, v := range []uint64{j.Seq, j.Out, j.Staging, j.Scratch, j.Counters} {
		b = le.AppendUint64(b, v)
	}
	snap := uint32(0)
	if j.Snapshot {
		snap = 1
	}
	for _, v := range []uint32{uint32(len(j.Regions)), j.TotalChunks, snap, 0} {
		b = le.AppendUint32(b, v)
	}
	for _, r := range j.Regions {
		b = le.AppendUint64(b, r.Base)
		b = le.AppendUint64(b, r.Size)
		b = le.AppendUint64(b, r.Shadow)
		b = le.AppendUint32(b, r.FirstChunk)
		b = le.AppendUint32(b, r.Flags)
	}
	return b[:JobBytes], nil
}

// ResultLayout gives the offsets of a job's result area.
type ResultLayout struct {
	ChunkHashes, TransferList, Size int
}

// Layout returns where the kernel writes the results of a job of chunks
// chunks. Region hashes are not among them: the reader folds a region's
// chunk hashes with memhash.Region.
func Layout(chunks uint32) ResultLayout {
	l := ResultLayout{ChunkHashes: ResultHeader}
	l.TransferList = l.ChunkHashes + 16*int(chunks)
	l.Size = l.TransferList + 4*int(chunks)
	return l
}

// Done reports whether the result area says job seq is complete, and how
// many chunks it copied to staging.
func Done(result []byte, seq uint64) (done bool, transferred uint32) {
	le := binary.LittleEndian
	if le.Uint64(result[resultDoneOffset:]) != seq {
		return false, 0
	}
	return true, le.Uint32(result[resultXferOffset:])
}
