package info

import (
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// batchOf puts records held in memory in one batch, as one frame of an events file holds them.
func batchOf(d *recording.Data) *pb.Batch {
	return &pb.Batch{Process: d.Process, Devices: d.Devices, Modules: d.Modules, Kernels: d.Kernels, Callstacks: d.Callstacks,
		Launches: d.Launches, Activities: d.Activities, OwnActivities: d.OwnActivities, GraphNodes: d.GraphNodes,
		GraphLaunches: d.GraphLaunches, Allocations: d.Allocations, Memory: d.Memory, Log: d.Log, Ranges: d.Ranges,
		RangeEnds: d.RangeEnds, Probes: d.ProbeResults, ProbeKernels: d.ProbeKernels, WriteSetMisses: d.WriteSetMisses,
		Hangs: d.Hangs, CopyStates: d.CopyStates, Stats: d.Stats, End: d.End}
}

// summarize describes a process from records held in memory, as Summarize does from an events
// file, but checks no file beside it.
func summarize(name string, d *recording.Data, steps *recording.Stepper) *Process {
	s := newSummary(name, steps, nil)
	if err := s.add(batchOf(d)); err != nil {
		panic(err) // the join's callbacks return no error
	}
	p, err := s.finish(d.Truncated)
	if err != nil {
		panic(err)
	}
	return p
}

// summarizeMemory is the memory capture summary of records held in memory.
func summarizeMemory(d *recording.Data) *Memory { return summarize("p", d, noSteps()).Memory }

// summarizeProbes is the probes summary of records held in memory.
func summarizeProbes(d *recording.Data) *Probes { return summarize("p", d, noSteps()).Probes }

// readOnlyBytes sums the regions memory capture covered, and of them those proved read-only.
func readOnlyBytes(d *recording.Data) (all, readOnly uint64) {
	m := summarizeMemory(d)
	return m.RegionBytes, m.ProvedReadOnlyBytes
}

func noSteps() *recording.Stepper {
	s, err := recording.NewStepper("")
	if err != nil {
		panic(err)
	}
	return s
}
