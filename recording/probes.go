package recording

import (
	"encoding/binary"
	"math"
	"time"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// ProbeRecordBytes is the size of one CTA's record in ProbeResult.ctas (format 1.10): the
// earliest entry and latest exit of its threads on the GPU's %globaltimer (u64 ns at 0 and 8),
// its SM (u32 at 16) and how many times its threads ran the counted instructions (u64 at 24).
// The probes start each record with the entry all ones and the exit zero (atomic min and max),
// so a CTA that never ran leaves it so.
const ProbeRecordBytes = 32

// ProbeCTA is one CTA's record of a probed launch.
type ProbeCTA struct {
	Index      int    // in grid order: x + grid.x * (y + grid.y * z)
	Start, End uint64 // %globaltimer ns: its threads' earliest entry and latest exit
	SM         uint32
	Count      uint64 // counted instructions its threads ran (0 when the probe counts none)
}

// Duration is how long the CTA ran.
func (c ProbeCTA) Duration() time.Duration { return time.Duration(c.End - c.Start) }

// XYZ are the CTA's coordinates in a grid of gx × gy × gz CTAs.
func (c ProbeCTA) XYZ(gx, gy uint32) (x, y, z uint32) {
	gx, gy = max(gx, 1), max(gy, 1)
	i := uint32(c.Index)
	return i % gx, i / gx % gy, i / (gx * gy)
}

// ProbeCTAs decodes a probe buffer (ProbeResult.ctas, or what gpurr probe's replay read back):
// the CTAs that left a record, in grid order, and how many of the buffer's records are
// untouched (the CTA did not run: the launch faulted or was cut short). Trailing bytes short of
// a record are ignored.
func ProbeCTAs(buf []byte) (ctas []ProbeCTA, missing int) {
	n := len(buf) / ProbeRecordBytes
	ctas = make([]ProbeCTA, 0, n)
	for i := range n {
		r := buf[i*ProbeRecordBytes : (i+1)*ProbeRecordBytes]
		c := ProbeCTA{Index: i, Start: binary.LittleEndian.Uint64(r), End: binary.LittleEndian.Uint64(r[8:]),
			SM: binary.LittleEndian.Uint32(r[16:]), Count: binary.LittleEndian.Uint64(r[24:])}
		if c.Start == math.MaxUint64 || c.End < c.Start {
			missing++
			continue
		}
		ctas = append(ctas, c)
	}
	return ctas, missing
}

// ProbeResult is the probe result of launch seq (gpurr record --probe), nil when the process
// wrote none for it: its kernel was not picked or not instrumented, or the record was lost.
func (d *Data) ProbeResult(seq uint64) *pb.ProbeResult {
	for _, r := range d.ProbeResults {
		if r.GetLaunchSeq() == seq {
			return r
		}
	}
	return nil
}

// ProbedLaunches lists the launches whose probes left data (not skipped), in the order written.
func (d *Data) ProbedLaunches() []uint64 {
	var out []uint64
	for _, r := range d.ProbeResults {
		if r.GetSkipped() == "" && len(r.GetCtas()) > 0 {
			out = append(out, r.GetLaunchSeq())
		}
	}
	return out
}

// Probed is a probe result with the launch it is of: nil when the recording does not hold the
// launch (its record was lost, or it came before the ProbeKernel record of its kernel).
type Probed struct {
	*pb.ProbeResult
	Launch *pb.Launch
}

// Probes pairs a process's probe results with their launches as a reader streams the frames
// (Add). It keeps the launches of the kernels --probe instrumented until their result comes
// (every such launch gets one, with data or saying why it has none), not the others.
type Probes struct {
	instrumented map[uint64]bool       // kernel ids
	waiting      map[uint64]*pb.Launch // by seq
}

// NewProbes returns an empty index.
func NewProbes() *Probes {
	return &Probes{instrumented: map[uint64]bool{}, waiting: map[uint64]*pb.Launch{}}
}

// Waiting reports whether launch seq is of an instrumented kernel and its result has not come.
func (p *Probes) Waiting(seq uint64) bool { return p.waiting[seq] != nil }

// Add indexes a batch's probe kernels and the launches of the instrumented ones, and returns
// the batch's probe results with their launches, in the order written.
func (p *Probes) Add(b *pb.Batch) []Probed {
	for _, k := range b.ProbeKernels {
		if k.GetInstrumented() {
			p.instrumented[k.GetKernelId()] = true
		}
	}
	if len(p.instrumented) == 0 && len(b.Probes) == 0 {
		return nil
	}
	for _, l := range b.Launches {
		if p.instrumented[l.GetKernelId()] {
			p.waiting[l.GetSeq()] = l
		}
	}
	var out []Probed
	for _, r := range b.Probes {
		out = append(out, Probed{ProbeResult: r, Launch: p.waiting[r.GetLaunchSeq()]})
		delete(p.waiting, r.GetLaunchSeq())
	}
	return out
}
