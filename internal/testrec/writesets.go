package testrec

import (
	"encoding/binary"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// WriteSetsOptions shape the recording WriteSetsBatches builds: one process recorded with
// --memory hash --nan-scan f32 and write sets (format 1.11), nine launches on one stream, which
// carry region states rather than hash them where a kernel cannot write a region:
//
//	launch 1  init(W)      W hashed
//	launch 2  add(W, A)    W carried, proved read-only from launch 1; A hashed
//	launch 3  add(W, A)    W carried from launch 1; A hashed
//	launch 4  step(X, A)   X and A hashed
//	launch 5  step(X, A)   learned: X carried, learned read-only, from launch 4
//	launch 6  step(X, A)   learned: X carried from launch 4, but X changed before it (stale)
//	launch 7  step(X, A)   learned: the audit hashes X, changed since launch 4: a WriteSetMiss
//	launch 8  init(W)      its state lost
//	launch 9  add(W, A)    W carried from launch 8, whose state was lost: unknown
//
// With Mode "proved", X is hashed at every launch, and there is no audit and no miss.
type WriteSetsOptions struct {
	Mode string // --write-sets: "learned" (the default when "") or "proved"
	// Diverge is the launch from which A holds other values than in a run without it (as a
	// nondeterministic kernel makes); 0 for none.
	Diverge uint64
	// NaNAt is the launch from which A holds a NaN, counted on the GPU (the f32 count); 0 for
	// none.
	NaNAt uint64
}

// The write sets program's allocations, by id, and their sizes.
const (
	WriteSetsW    = 1 // the weights: 2 chunks
	WriteSetsA    = 2 // the activations
	WriteSetsX    = 3 // the input step reads, and something else writes once
	writeSetsBase = 0x7f3a_0000_0000
)

// WriteSetsMissAudit and WriteSetsMissSince are the launches of the learned recording's
// WriteSetMiss: the audit that found X changed, and the last launch that hashed it before.
const (
	WriteSetsMissAudit = 7
	WriteSetsMissSince = 4
	// WriteSetsUnknown is the launch whose region 0 (W) is carried from a lost state.
	WriteSetsUnknown = 9
	// WriteSetsLost is the launch whose state was lost.
	WriteSetsLost = 8
)

var writeSetsSizes = map[uint64]uint64{WriteSetsW: 128 << 10, WriteSetsA: 64 << 10, WriteSetsX: 64 << 10}

// The write sets program's kernels: init writes its one pointer; add reads its first (which its
// PTX proves) and writes its second; step reads its first (which its launches learn) and
// writes its second.
const (
	wsInit = iota + 1
	wsAdd
	wsStep
)

func writeSetsKernels() []*pb.Kernel {
	names := map[uint64]string{wsInit: "_Z4initPf", wsAdd: "triton_poi_fused_add_0", wsStep: "_Z4stepPKfPf"}
	var out []*pb.Kernel
	for id := uint64(wsInit); id <= wsStep; id++ {
		params := []*pb.ParamInfo{{Offset: 0, Size: 8}}
		if id != wsInit {
			params = append(params, &pb.ParamInfo{Offset: 8, Size: 8})
		}
		params[0].ProvedReadOnly = id == wsAdd
		out = append(out, &pb.Kernel{Id: id, Identity: recording.KernelIdentity("", names[id]), Name: names[id],
			Params: params, ParamBytes: uint32(8 * len(params))})
	}
	return out
}

// WriteSetsBatches returns the frames of the process o describes, the first holding
// its Process: for OpenBatches, or the WriteSets variants.
func WriteSetsBatches(o WriteSetsOptions) []*pb.Batch {
	mode := o.Mode
	if mode == "" {
		mode = "learned"
	}
	learned := mode == "learned"
	const start = startNS
	rank := int32(0)
	cfg := &pb.MemoryConfig{Mode: recording.MemoryHash, ChunkBytes: memhash.ChunkSize, OnFull: "backpressure", StagingBytes: 64 << 20,
		NanScan: []string{"f32"}, WriteSets: mode}
	if learned {
		cfg.AuditEvery = 3
	}
	proc := &pb.Process{Pid: pid(0), Ppid: 4200, Hostname: "gpu-box", Argv: []string{"python", script},
		Rank: &rank, WorldSize: ptr(int32(1)), StartNs: start, StartUnixNs: startUnixNS, AgentVersion: "0.1.0",
		CallstackMode: "auto", Memory: cfg}
	stats := &pb.Stats{}
	version := map[uint64]int{} // what each allocation holds now
	diverged := map[uint64]bool{}
	type known struct {
		seq uint64
		rs  *pb.RegionState
	}
	last := map[uint64]known{} // each allocation's last hashed state
	state := func(seq, id uint64) *pb.RegionState {
		data := make([]byte, writeSetsSizes[id])
		for i := 0; i+8 <= len(data); i += 8 {
			v := uint64(i)*0x9e3779b97f4a7c15 ^ id<<56 ^ uint64(version[id])<<40
			if diverged[id] {
				v ^= 0xd1
			}
			binary.LittleEndian.PutUint64(data[i:], v)
		}
		rs, _ := RegionState(data, nil) // without a chunk store it cannot fail
		rs.NanCount, rs.InfCount = []uint64{0}, []uint64{0}
		if id == WriteSetsA && o.NaNAt > 0 && seq >= o.NaNAt {
			rs.NanCount[0] = 1
		}
		stats.BytesHashed += writeSetsSizes[id]
		last[id] = known{seq, rs}
		return rs
	}
	lost := map[uint64]bool{WriteSetsLost: true}
	carry := func(id uint64, how pb.RegionState_Carried) *pb.RegionState {
		stats.BytesCarried += writeSetsSizes[id]
		if how == pb.RegionState_LEARNED_READ_ONLY {
			stats.RegionsCarriedLearned++
		} else {
			stats.RegionsCarriedProved++
		}
		from := last[id]
		if lost[from.seq] {
			stats.RegionsCarriedUnknown++
			return &pb.RegionState{Carried: how, Unknown: true}
		}
		return &pb.RegionState{Carried: how, CarriedFrom: from.seq, Hash: from.rs.Hash,
			NanCount: from.rs.NanCount, InfCount: from.rs.InfCount}
	}
	params := func(ids ...uint64) []byte {
		b := make([]byte, 8*len(ids))
		for i, id := range ids {
			binary.LittleEndian.PutUint64(b[8*i:], writeSetsBase+id<<20)
		}
		return b
	}
	var allocs []*pb.Allocation
	for id := uint64(WriteSetsW); id <= WriteSetsX; id++ {
		allocs = append(allocs, &pb.Allocation{Id: id, Kind: pb.Allocation_MEM_ALLOC, Address: writeSetsBase + id<<20,
			Size: writeSetsSizes[id], HostNs: start + id})
		stats.Allocations++
	}
	var launches []*pb.Launch
	var states []*pb.MemoryState
	var misses []*pb.WriteSetMiss
	for seq := uint64(1); seq <= WriteSetsUnknown; seq++ {
		var kernel uint64
		var ids []uint64
		switch {
		case seq == 1 || seq == WriteSetsLost:
			kernel, ids = wsInit, []uint64{WriteSetsW}
		case seq <= 3 || seq == WriteSetsUnknown:
			kernel, ids = wsAdd, []uint64{WriteSetsW, WriteSetsA}
		default:
			kernel, ids = wsStep, []uint64{WriteSetsX, WriteSetsA}
		}
		l := &pb.Launch{Seq: seq, Tid: pid(0), StreamId: defaultSID, KernelId: kernel, Grid: dim(64, 1, 1), Block: dim(128, 1, 1),
			Params: params(ids...), CorrelationId: 100 + uint32(seq), HostNs: start + seq*launchGapNS, Api: 307,
			Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}}
		for i, id := range ids {
			l.Regions = append(l.Regions, &pb.Region{Address: writeSetsBase + id<<20, Size: writeSetsSizes[id], ParamOffsets: []uint32{uint32(8 * i)}, AllocationId: id})
		}
		launches = append(launches, l)
		stats.Launches++
		stats.MemoryLaunches++
		// What the launch writes: its last region, or init's only one; X changes unseen before launch 6.
		written := ids[len(ids)-1]
		version[written]++
		if written == WriteSetsA && o.Diverge > 0 && seq >= o.Diverge {
			diverged[WriteSetsA] = true
		}
		if seq == 6 {
			version[WriteSetsX]++
		}
		st := &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER}
		if lost[seq] {
			st.Lost, st.LostReason = true, "dropped: the results ring was full (drop-oldest)"
			stats.MemoryStatesLost++
			last[WriteSetsW] = known{seq: seq}
			states = append(states, st)
			continue
		}
		stats.MemoryStates++
		audit := learned && kernel == wsStep && seq == WriteSetsMissAudit
		if audit {
			stats.WriteSetAudits++
		}
		for _, id := range ids {
			switch {
			case id == WriteSetsW && kernel == wsAdd:
				st.Regions = append(st.Regions, carry(id, pb.RegionState_PROVED_READ_ONLY))
			case id == WriteSetsX && learned && seq > 4 && !audit:
				st.Regions = append(st.Regions, carry(id, pb.RegionState_LEARNED_READ_ONLY))
			case id == WriteSetsX && audit:
				since := last[id].seq
				st.Regions = append(st.Regions, state(seq, id))
				misses = append(misses, &pb.WriteSetMiss{KernelId: kernel, ParamOffsets: []uint32{0}, AuditSeq: seq, SinceSeq: since, AllocationId: id})
				stats.WriteSetMisses++
			default:
				st.Regions = append(st.Regions, state(seq, id))
			}
		}
		states = append(states, st)
	}
	// The states come a frame after their launches; the counters, as of the last frame, count
	// them all.
	stats.FramesWritten = 4
	return []*pb.Batch{
		{Process: proc},
		{Kernels: writeSetsKernels(), Allocations: allocs, Launches: launches[:5]},
		{Launches: launches[5:], Memory: states[:5]},
		{Memory: states[5:], WriteSetMisses: misses, Stats: stats},
		{End: &pb.End{EndNs: start + 20*launchGapNS, Reason: "exit"}},
	}
}
