package kernels

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/recording/memhash"
)

//go:embed ptx/hash.ptx
var memcapPTX []byte

// MemcapPTX returns the PTX module of the memory-capture kernel
// (src/hash.cu), NUL-terminated as cuModuleLoadData wants PTX text. The
// slice is a copy.
func MemcapPTX() []byte { return append(append([]byte(nil), memcapPTX...), 0) }

// Memcap is gpurr_memcap(gpurr_batch batch): one block of 256 threads per
// chunk of every region of each job of the batch. It writes gpurr-h128
// chunk hashes (docs/hash.md) to each job's result area and, for a snapshot
// job, copies the chunks whose hash differs from the region's shadow to
// staging. Layouts: EncodeBatch, ResultLayout.
const Memcap = "gpurr_memcap"

// MemcapNan is gpurr_memcap_nan(gpurr_batch batch): Memcap that also counts
// NaN and Inf as each job's NanDtypes. The agent launches it for batches
// whose jobs have NanDtypes, Memcap (which ignores them) for the others.
const MemcapNan = "gpurr_memcap_nan"

// Limits and layout constants shared with src/hash.cu and the agent
// (internal/agent/memcap.h). The kernel hashes and copies memory in chunks
// of memhash.ChunkSize bytes, one block per chunk.
const (
	BlockThreads     = 256
	MaxJobRegions    = 48 // regions of a job, and of a batch
	MaxBatchJobs     = 8
	jobBytes         = 72                                           // sizeof(gpurr_job)
	BatchBytes       = 8 + MaxBatchJobs*jobBytes + MaxJobRegions*32 // sizeof(gpurr_batch)
	ResultHeader     = 64                                           // done (u64), transferred (u32), padding
	RegionCopyAll    = 1                                            // gpurr_region.flags: ignore the shadow, copy every chunk
	NanCounters      = 8                                            // nan-scan counters per region: NaN and Inf of each NanScanTypes entry
	resultDoneOffset = 0
	resultXferOffset = 8
)

// NanScanTypes are the types the kernel can count NaN and Inf as; type i
// is bit 1<<i of Job.NanDtypes, and its counters are 2i (NaN) and 2i+1
// (Inf) of each region.
var NanScanTypes = [...]string{"f32", "f64", "f16", "bf16"}

// NanScanMask returns the Job.NanDtypes bits for the named types, and the
// names in bit order (the order the recording lists them in).
func NanScanMask(names []string) (uint32, []string, error) {
	var mask uint32
	for _, n := range names {
		i := slices.Index(NanScanTypes[:], n)
		if i < 0 {
			return 0, nil, fmt.Errorf("%q is not a type the GPU counts NaN as (want %s)", n, strings.Join(NanScanTypes[:], ", "))
		}
		mask |= 1 << i
	}
	var ordered []string
	for i, n := range NanScanTypes {
		if mask&(1<<i) != 0 {
			ordered = append(ordered, n)
		}
	}
	return mask, ordered, nil
}

// JobRegion is one region of a Job.
type JobRegion struct {
	Base, Size uint64
	Shadow     uint64 // device pointer to a hash per chunk, or 0
	FirstChunk uint32
	Flags      uint32
}

// Job is gpurr_job: the regions of one launch, and where their results go.
type Job struct {
	Seq         uint64
	Out         uint64 // device address of the result area (mapped host memory)
	Staging     uint64 // device address of the staging area (snapshot), or 0
	Scratch     uint64 // device memory for one hash per chunk
	Counters    uint64 // two zeroed device uint32s
	NanCounts   uint64 // nan-scan: NanCounters zeroed device uint64s per region, or 0
	TotalChunks uint32
	Snapshot    bool
	NanDtypes   uint32 // nan-scan: NanScanTypes bits to count, 0 for none
	Regions     []JobRegion
}

// Chunks returns how many chunks a region of n bytes has.
func Chunks(n uint64) uint32 { return uint32((n + memhash.ChunkSize - 1) / memhash.ChunkSize) }

// NewJob lays out regions of the given sizes one after another.
func NewJob(sizes ...uint64) Job {
	var j Job
	for _, n := range sizes {
		j.Regions = append(j.Regions, JobRegion{Size: n, FirstChunk: j.TotalChunks})
		j.TotalChunks += Chunks(n)
	}
	return j
}

// Encode returns a batch of the one job as the kernel's parameter bytes.
func (j Job) Encode() ([]byte, error) { return EncodeBatch(j) }

// EncodeBatch returns the jobs, hashed by one launch of TotalChunks blocks
// summed over them, as the kernel's parameter bytes (gpurr_batch): each
// job's blocks follow the previous job's. Every job needs a chunk, and the
// batch at most MaxJobRegions regions in all.
func EncodeBatch(jobs ...Job) ([]byte, error) {
	if len(jobs) == 0 || len(jobs) > MaxBatchJobs {
		return nil, fmt.Errorf("memcap batch: %d jobs (1 to %d)", len(jobs), MaxBatchJobs)
	}
	le := binary.LittleEndian
	b := make([]byte, 0, BatchBytes)
	regions := 0
	for _, j := range jobs {
		regions += len(j.Regions)
	}
	if regions > MaxJobRegions {
		return nil, fmt.Errorf("memcap batch: %d regions (at most %d)", regions, MaxJobRegions)
	}
	b = le.AppendUint32(b, uint32(len(jobs)))
	b = le.AppendUint32(b, uint32(regions))
	firstRegion, firstBlock := 0, uint32(0)
	for _, j := range jobs {
		if len(j.Regions) == 0 || j.TotalChunks == 0 {
			return nil, fmt.Errorf("memcap job: %d regions, %d chunks (a job needs both)", len(j.Regions), j.TotalChunks)
		}
		for _, v := range []uint64{j.Seq, j.Out, j.Staging, j.Scratch, j.Counters, j.NanCounts} {
			b = le.AppendUint64(b, v)
		}
		snap := uint32(0)
		if j.Snapshot {
			snap = 1
		}
		for _, v := range []uint32{uint32(len(j.Regions)), j.TotalChunks, snap, j.NanDtypes, uint32(firstRegion), firstBlock} {
			b = le.AppendUint32(b, v)
		}
		firstRegion += len(j.Regions)
		firstBlock += j.TotalChunks
	}
	b = b[:8+MaxBatchJobs*jobBytes]
	for _, j := range jobs {
		for _, r := range j.Regions {
			b = le.AppendUint64(b, r.Base)
			b = le.AppendUint64(b, r.Size)
			b = le.AppendUint64(b, r.Shadow)
			b = le.AppendUint32(b, r.FirstChunk)
			b = le.AppendUint32(b, r.Flags)
		}
	}
	return b[:BatchBytes], nil
}

// ResultLayout gives the offsets of a job's result area.
type ResultLayout struct {
	ChunkHashes, TransferList, NanCounts, Size int
}

// Layout returns where the kernel writes the results of a job of chunks
// chunks; nanRegions is the job's region count when it has NanDtypes, else
// 0. Region hashes are not among the results: the reader folds a region's
// chunk hashes with memhash.Region.
func Layout(chunks uint32, nanRegions int) ResultLayout {
	l := ResultLayout{ChunkHashes: ResultHeader}
	l.TransferList = l.ChunkHashes + 16*int(chunks)
	l.NanCounts = (l.TransferList + 4*int(chunks) + 7) &^ 7
	l.Size = l.NanCounts + 8*NanCounters*nanRegions
	return l
}

// RegionNanCounts returns region i's nan-scan counters from a result area
// laid out by l: NaN and Inf of each NanScanTypes entry, in turn.
func (l ResultLayout) RegionNanCounts(result []byte, i int) [NanCounters]uint64 {
	var c [NanCounters]uint64
	for k := range c {
		c[k] = binary.LittleEndian.Uint64(result[l.NanCounts+8*(NanCounters*i+k):])
	}
	return c
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
