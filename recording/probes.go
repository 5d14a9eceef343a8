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
