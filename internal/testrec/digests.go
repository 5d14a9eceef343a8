package testrec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Trained is a training run the way the agent records it with step digests (gpurr record
// --memory digest), or with --memory hash --hash-steps (HashSteps): what gpurr bisect reads.
// Each of Steps steps makes Launches launches on one stream; the last of them is the
// optimizer's (a Python frame in torch/optim), so readers number steps as the agent did.
// Launch g (counting from 0 over the run) reads allocation g%Allocs and writes (g+1)%Allocs,
// with a float scalar parameter lr; the state of each allocation follows from what was
// written into it, so a difference spreads as it would. Every step boundary gets a digest of
// the program's allocations; an allocation NCCL made is never in them. Ranks > 1 writes one
// process per torchrun rank.
type Trained struct {
	Steps, Launches, Allocs int // 6, 4 and 3 when 0
	Ranks                   int // torchrun ranks; 0: one process without a rank
	// HashSteps, when Hash is set, are the steps whose launches are hashed (inclusive).
	Hash      bool
	HashSteps [2]int
	// Diverge makes launch DivergeLaunch of step DivergeStep of rank DivergeRank write other
	// bytes (a nondeterministic kernel); -1: never.
	DivergeStep, DivergeLaunch, DivergeRank int
	// LR is the lr parameter of every launch (0: 0.001).
	LR float32
	// NaN makes that launch of NaNStep write a NaN; -1: never.
	NaNStep, NaNLaunch int
	// LossNaN puts that NaN into a loss: an allocation no launch reads and the optimizer never
	// reaches, which only digests of every allocation (DigestAll, --digest-all) hold.
	LossNaN, DigestAll bool
	// StaleNaN gives the process an allocation that holds NaN bit patterns from its start and
	// that no launch writes (what XLA's autotuning leaves in its scratch memory): digests of
	// every allocation count its NaN from the first step on.
	StaleNaN bool
	Salt     uint64 // changes what DivergeStep writes: another run of a nondeterministic kernel
	// NCCL, when not 0, makes the first launch of each step also reach the allocation NCCL
	// made for itself, whose bytes depend on NCCL: another run's are other bytes.
	NCCL uint64
	// NCCLNaN makes NCCL's memory hold a NaN bit pattern, as its flags and FIFOs may, counted
	// as f32 like the program's regions.
	NCCLNaN bool
	// TimedSteps, FIRST and EVERY, records GPU timing by steps (--gpu-timing-steps
	// FIRST/EVERY, format 1.16): each launch of steps 0 to FIRST-1 and of every EVERY-th step
	// has a kernel run of 10 µs, the others are untimed. Zero: no GPU timing.
	TimedSteps [2]int
}

// staleNaNs is how many NaN a StaleNaN allocation holds.
const staleNaNs = 4096

// DefaultTrained is a Trained run with no divergence and no NaN.
func DefaultTrained() Trained {
	return Trained{DivergeStep: -1, DivergeLaunch: -1, NaNStep: -1, NaNLaunch: -1}
}

// TrainedScript is the script of a Trained run; its lines name launch i of a step at line
// TrainedLine(i), the optimizer's inside torch/optim.
const TrainedScript = "/home/ada/train.py"

// TrainedLine is the line of the script that makes launch i of a step.
func TrainedLine(i int) uint32 { return 30 + uint32(i) }

// TrainedAllocLine is the line of the script that allocated allocation a.
func TrainedAllocLine(a int) uint32 { return 10 + uint32(a) }

// WriteTrained writes a Trained run into dir, one process per rank.
func WriteTrained(dir string, o Trained) error {
	for r := range max(o.Ranks, 1) {
		if _, err := writeFrames(dir, r, TrainedBatches(o, r)); err != nil {
			return err
		}
	}
	return nil
}

// OpenTrained writes a Trained run into a temporary folder of tb's and opens rank 0's process.
func OpenTrained(tb testing.TB, o Trained) *recording.Process {
	tb.Helper()
	dir := tb.TempDir()
	if err := WriteTrained(dir, o); err != nil {
		tb.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return set.Processes[0]
}

// TrainedBatches are the batches the agent writes for rank r of a Trained run.
func TrainedBatches(o Trained, r int) []*pb.Batch {
	steps, per, nalloc := cmpInt(o.Steps, 6), cmpInt(o.Launches, 4), cmpInt(o.Allocs, 3)
	lr := o.LR
	if lr == 0 {
		lr = 0.001
	}
	mem := &pb.MemoryConfig{Mode: recording.MemoryDigest, ChunkBytes: memhash.ChunkSize, NanScan: []string{"f32"}, Digests: true}
	if o.Hash {
		mem.Mode, mem.HashSteps = recording.MemoryHash, fmt.Sprintf("%d-%d", o.HashSteps[0], o.HashSteps[1])
		mem.WriteSets = "all"
	}
	proc := &pb.Process{Pid: pid(r), Ppid: 4200, Hostname: "gpu-box", Argv: []string{"python", TrainedScript},
		StartNs: startNS, StartUnixNs: startUnixNS, AgentVersion: "0.1.0", CallstackMode: "auto", Memory: mem}
	if o.Ranks > 0 {
		proc.Rank, proc.WorldSize = ptr(int32(r)), ptr(int32(o.Ranks))
	}
	timing := o.TimedSteps != [2]int{}
	if timing {
		proc.GpuTiming, proc.GpuTimingSample = true, "20ms/200ms"
		proc.GpuTimingSteps = fmt.Sprintf("%d/%d", o.TimedSteps[0], o.TimedSteps[1])
	}
	first := &pb.Batch{Process: proc}
	// Callstacks: one per launch of a step, the last in the optimizer's step; one per allocation.
	var launchStacks []*pb.Callstack
	for i := range per {
		frames := []*pb.Frame{py(TrainedScript, TrainedLine(i), "train"), py(TrainedScript, 90, "<module>")}
		if i == per-1 {
			frames = append([]*pb.Frame{py("/usr/lib/python3/site-packages/torch/optim/sgd.py", 120, "SGD.step")}, frames...)
		}
		launchStacks = append(launchStacks, callstack(frames))
	}
	first.Callstacks = append(first.Callstacks, launchStacks...)
	for i := range per {
		first.Kernels = append(first.Kernels, &pb.Kernel{Id: uint64(i + 1), Identity: 0x7a00 + uint64(i), Name: fmt.Sprintf("train_kernel_%d", i),
			Params: []*pb.ParamInfo{{Offset: 0, Size: 8}, {Offset: 8, Size: 8}, {Offset: 16, Size: 4}}, ParamBytes: 20})
	}
	base := deviceBase(r)
	var allocs []*pb.Allocation
	for a := range nalloc {
		cs := callstack([]*pb.Frame{py(TrainedScript, TrainedAllocLine(a), "setup"), py(TrainedScript, 90, "<module>")})
		first.Callstacks = append(first.Callstacks, cs)
		al := &pb.Allocation{Id: uint64(a + 1), Kind: pb.Allocation_MEM_ALLOC, Address: base + uint64(a)<<24, Size: trainedAllocBytes,
			HostNs: startNS + uint64(a), CallstackId: cs.GetId()}
		allocs = append(allocs, al)
	}
	nccl := &pb.Allocation{Id: uint64(nalloc + 1), Kind: pb.Allocation_MEM_MAP, Address: base + 0x10_0000_0000, Size: 2 << 20,
		HostNs: startNS + 99, Owner: recording.OwnerNCCL}
	loss := &pb.Allocation{Id: uint64(nalloc + 2), Kind: pb.Allocation_MEM_ALLOC, Address: base + uint64(nalloc)<<24, Size: trainedAllocBytes,
		HostNs: startNS + 100}
	first.Allocations = append(allocs, nccl, loss)
	scratch := &pb.Allocation{Id: uint64(nalloc + 3), Kind: pb.Allocation_MEM_ALLOC, Address: base + uint64(nalloc+1)<<24, Size: trainedAllocBytes,
		HostNs: startNS + 101}
	if o.StaleNaN {
		first.Allocations = append(first.Allocations, scratch)
	}
	lossNaN := false
	lossState := func() *pb.RegionState {
		rs, _ := RegionState(trainedBytes(7, lossNaN), nil)
		rs.NanCount, rs.InfCount = []uint64{0}, []uint64{0}
		if lossNaN {
			rs.NanCount[0] = 1
		}
		return rs
	}

	version := make([]uint64, nalloc) // what each allocation holds
	nan := make([]bool, nalloc)
	for a := range version {
		version[a] = uint64(a+1) * 0x9e37
	}
	state := func(a int) *pb.RegionState {
		rs, _ := RegionState(trainedBytes(version[a], nan[a]), nil)
		rs.NanCount, rs.InfCount = []uint64{0}, []uint64{0}
		if nan[a] {
			rs.NanCount[0] = 1
		}
		return rs
	}
	batches := []*pb.Batch{first}
	seq := uint64(0)
	for s := range steps {
		b := &pb.Batch{}
		hashed := o.Hash && s >= o.HashSteps[0] && s <= o.HashSteps[1]
		for i := range per {
			g := s*per + i
			in, out := g%nalloc, (g+1)%nalloc
			seq++
			if i == 0 && s > 0 { // the digest of the step that ended, before this launch
				d := &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_DIGEST, Step: uint32(s - 1), DigestOf: "optimizer"}
				for a := range nalloc {
					d.Regions = append(d.Regions, state(a))
					d.DigestRegions = append(d.DigestRegions, &pb.Region{Address: allocs[a].GetAddress(), Size: trainedAllocBytes, AllocationId: allocs[a].GetId()})
				}
				if o.DigestAll {
					d.DigestOf = "all"
					d.Regions = append(d.Regions, lossState())
					d.DigestRegions = append(d.DigestRegions, &pb.Region{Address: loss.GetAddress(), Size: trainedAllocBytes, AllocationId: loss.GetId()})
					if o.StaleNaN {
						rs, _ := RegionState(trainedBytes(11, true), nil)
						rs.NanCount, rs.InfCount = []uint64{staleNaNs}, []uint64{0}
						d.Regions = append(d.Regions, rs)
						d.DigestRegions = append(d.DigestRegions, &pb.Region{Address: scratch.GetAddress(), Size: trainedAllocBytes, AllocationId: scratch.GetId()})
					}
				}
				b.Digests = append(b.Digests, d)
			}
			version[out] = version[out]*31 + version[in] + uint64(g)
			if s == o.DivergeStep && i == o.DivergeLaunch && r == o.DivergeRank {
				version[out] += 1 + o.Salt
			}
			version[out] += uint64(math.Float32bits(lr)) // lr enters every update
			planted := s == o.NaNStep && i == o.NaNLaunch
			nan[out] = nan[in] || planted && !o.LossNaN
			lossNaN = lossNaN || planted && o.LossNaN
			params := binary.LittleEndian.AppendUint64(nil, allocs[in].GetAddress()+64)
			params = binary.LittleEndian.AppendUint64(params, allocs[out].GetAddress())
			params = binary.LittleEndian.AppendUint32(params, math.Float32bits(lr))
			l := &pb.Launch{Seq: seq, Tid: pid(r), Device: 0, Stream: 0, KernelId: uint64(i + 1), CallstackId: launchStacks[i].GetId(),
				HostNs: startNS + seq*launchGapNS, Api: 307, Grid: dim(8, 1, 1), Block: dim(128, 1, 1), Params: params}
			switch {
			case hashed:
				l.Regions = []*pb.Region{
					{Address: allocs[in].GetAddress(), Size: trainedAllocBytes, ParamOffsets: []uint32{0}, AllocationId: allocs[in].GetId()},
					{Address: allocs[out].GetAddress(), Size: trainedAllocBytes, ParamOffsets: []uint32{8}, AllocationId: allocs[out].GetId()},
				}
				l.Memory = &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}
				st := &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{state(in), state(out)}}
				if o.NCCL != 0 && i == 0 {
					l.Regions = append(l.Regions, &pb.Region{Address: nccl.GetAddress(), Size: nccl.GetSize(), ParamOffsets: []uint32{16}, AllocationId: nccl.GetId()})
					rs, _ := RegionState(trainedBytes(o.NCCL*uint64(seq), o.NCCLNaN), nil)
					rs.NanCount, rs.InfCount = []uint64{0}, []uint64{0}
					if o.NCCLNaN {
						rs.NanCount[0] = 1
					}
					st.Regions = append(st.Regions, rs)
				}
				if planted && o.LossNaN {
					l.Regions = append(l.Regions, &pb.Region{Address: loss.GetAddress(), Size: trainedAllocBytes, ParamOffsets: []uint32{16}, AllocationId: loss.GetId()})
					st.Regions = append(st.Regions, lossState())
				}
				b.Memory = append(b.Memory, st)
			case o.Hash:
				l.Memory = &pb.MemoryPlan{Status: pb.MemoryPlan_OUTSIDE_STEPS}
			}
			if timing {
				l.CorrelationId = uint32(seq)
				if s < o.TimedSteps[0] || o.TimedSteps[1] > 0 && s%o.TimedSteps[1] == 0 {
					start := l.GetHostNs() + 5_000
					b.Activities = append(b.Activities, &pb.KernelActivity{CorrelationId: uint32(seq), StartNs: start, EndNs: start + 10_000,
						Name: fmt.Sprintf("train_kernel_%d", i), Grid: l.Grid, Block: l.Block})
				} else {
					l.Untimed = true
				}
			}
			b.Launches = append(b.Launches, l)
		}
		batches = append(batches, b)
	}
	batches[len(batches)-1].Stats = &pb.Stats{Launches: seq, Digests: uint64(steps - 1)}
	batches[len(batches)-1].End = &pb.End{EndNs: startNS + (seq+1)*launchGapNS, Reason: "exit"}
	return batches
}

// trainedAllocBytes is the size of each allocation of a Trained run: two 64 KiB chunks.
const trainedAllocBytes = 128 << 10

// trainedBytes are the contents of an allocation of a Trained run that holds version v: a
// float32 array, its element 3 of the second chunk NaN when nan.
func trainedBytes(v uint64, nan bool) []byte {
	data := make([]byte, trainedAllocBytes)
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], v*0x9e3779b97f4a7c15^uint64(i))
	}
	if nan {
		binary.LittleEndian.PutUint32(data[memhash.ChunkSize+12:], 0x7fc00000)
	}
	return data
}

func cmpInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// TrainedRun is the Trained run a fake gpurr record makes of a command and its flags, for
// bisect's tests: the command's words say what is planted (diverge STEP LAUNCH: a
// nondeterministic launch, which writes other bytes in every run, or in the runs listed by
// early RUN...: there a step earlier; nan STEP LAUNCH; lossnan: that NaN in a loss only;
// stalenan: NaN in memory no launch writes, from the start;
// lr X; steps N; ranks N), the flags what record would record (--hash-steps K[-L],
// --digest-all). run numbers the runs of a bisect from 1 (a nondeterministic launch writes
// other bytes in each).
func TrainedRun(command, flags []string, run int, early map[int]bool) Trained {
	o := DefaultTrained()
	o.Salt = uint64(run)
	for i := 0; i < len(command); i++ {
		num := func(k int) int {
			if i+k >= len(command) {
				return 0
			}
			n, _ := strconv.Atoi(command[i+k])
			return n
		}
		switch command[i] {
		case "diverge":
			o.DivergeStep, o.DivergeLaunch, o.DivergeRank = num(1), num(2), 0
			if early[run] {
				o.DivergeStep--
			}
		case "nan":
			o.NaNStep, o.NaNLaunch = num(1), num(2)
		case "lossnan":
			o.LossNaN = true
		case "stalenan":
			o.StaleNaN = true
		case "lr":
			if i+1 < len(command) {
				v, _ := strconv.ParseFloat(command[i+1], 32)
				o.LR = float32(v)
			}
		case "steps":
			o.Steps = num(1)
		case "ranks":
			o.Ranks = num(1)
		}
	}
	for i, flag := range flags {
		o.DigestAll = o.DigestAll || flag == "--digest-all"
		if flag == "--hash-steps" && i+1 < len(flags) {
			lo, hi, _ := strings.Cut(flags[i+1], "-")
			o.Hash = true
			o.HashSteps[0], _ = strconv.Atoi(lo)
			o.HashSteps[1] = o.HashSteps[0]
			if hi != "" {
				o.HashSteps[1], _ = strconv.Atoi(hi)
			}
		}
	}
	return o
}
