package testrec

import (
	"encoding/binary"
	"math"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// ProbeRecorded is the --probe the Probe variant's rank 0 was recorded with.
const ProbeRecorded = "triton_|add_kernel:entry,exit,global-store"

// The Probe variant's probed launch: the eager Triton launch, 256 CTAs in two waves over 132
// SMs, where CTA 200 ran longest and CTA 7 left no record. ProbeStart is its first CTA's entry
// on the GPU's %globaltimer, a clock of its own.
const (
	ProbedLaunch  = 10
	SkippedLaunch = 12 // the Triton launch captured into the graph: its replays ran without probes
	ProbeStart    = 1_731_000_000_000_000_000
	SlowCTA       = 200
	MissingCTA    = 7
)

// ProbeBuffer lays ctas out as a probe buffer of n records (ProbeResult.ctas): each at its
// Index, the others untouched (entry all ones, exit zero), as a CTA that never ran leaves its
// record.
func ProbeBuffer(n int, ctas ...recording.ProbeCTA) []byte {
	b := make([]byte, n*recording.ProbeRecordBytes)
	for i := range n {
		binary.LittleEndian.PutUint64(b[i*recording.ProbeRecordBytes:], math.MaxUint64)
	}
	for _, c := range ctas {
		r := b[c.Index*recording.ProbeRecordBytes:]
		binary.LittleEndian.PutUint64(r, c.Start)
		binary.LittleEndian.PutUint64(r[8:], c.End)
		binary.LittleEndian.PutUint32(r[16:], c.SM)
		binary.LittleEndian.PutUint64(r[24:], c.Count)
	}
	return b
}

// probedTriton is the probe result of the Probe variant's probed launch: wave 2 starts 1.45 µs
// after wave 1, each CTA runs 1.4 µs and its threads store 64 to 67 times, but CTA 200 runs
// 1.6 µs.
func probedTriton() *pb.ProbeResult {
	const n, sms = 256, 132
	var ctas []recording.ProbeCTA
	for i := range n {
		if i == MissingCTA {
			continue
		}
		start := uint64(ProbeStart + (i/sms)*1450 + (i%sms)*3)
		d := uint64(1400)
		if i == SlowCTA {
			d = 1600
		}
		ctas = append(ctas, recording.ProbeCTA{Index: i, Start: start, End: start + d, SM: uint32(i % sms), Count: uint64(64 + i%4)})
	}
	return &pb.ProbeResult{LaunchSeq: ProbedLaunch, Ctas: ProbeBuffer(n, ctas...)}
}

// probeKernels are what became of the kernels ProbeRecorded picks: the Triton kernel was
// instrumented (its PTX is kept), add_kernel was not.
func probeKernels() (triton, add *pb.ProbeKernel) {
	return &pb.ProbeKernel{KernelId: kernelID(kTriton), Instrumented: true, Count: "global-store", Counted: 2},
		&pb.ProbeKernel{KernelId: kernelID(kAdd), Reason: "no PTX for its module (only Triton's is kept)"}
}
