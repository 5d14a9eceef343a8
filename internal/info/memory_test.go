package info

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A Triton kernel whose PTX proves its first pointer read-only: of its launch's two regions the
// input counts as read-only; a region the written pointer also points into does not; a launch
// memory capture skipped and a kernel without proofs count as written or not at all.
func TestReadOnlyBytes(t *testing.T) {
	hashed := &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}
	d := &recording.Data{
		Process: &pb.Process{Memory: &pb.MemoryConfig{Mode: "hash"}},
		Kernels: []*pb.Kernel{
			{Id: 1, Name: "triton_add", Params: []*pb.ParamInfo{{Offset: 0, Size: 8, ProvedReadOnly: true}, {Offset: 8, Size: 8}}},
			{Id: 2, Name: "cublas_gemm", Params: []*pb.ParamInfo{{Offset: 0, Size: 8}}},
		},
		Launches: []*pb.Launch{
			{Seq: 1, KernelId: 1, Memory: hashed, Regions: []*pb.Region{
				{Size: 1000, ParamOffsets: []uint32{0}}, // the input: read-only
				{Size: 300, ParamOffsets: []uint32{8}},  // the output
			}},
			{Seq: 2, KernelId: 1, Memory: hashed, Regions: []*pb.Region{
				{Size: 500, ParamOffsets: []uint32{0, 8}}, // in and out in one allocation
			}},
			{Seq: 3, KernelId: 2, Memory: hashed, Regions: []*pb.Region{{Size: 4000, ParamOffsets: []uint32{0}}}},
			{Seq: 4, KernelId: 1, Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_SKIPPED_CAPTURE},
				Regions: []*pb.Region{{Size: 7000, ParamOffsets: []uint32{0}}}},
		},
	}
	all, ro := readOnlyBytes(d)
	if all != 5800 || ro != 1000 {
		t.Errorf("%d read-only bytes of %d, want 1000 of 5800", ro, all)
	}
	var b strings.Builder
	summarizeMemory(d).write(&textWriter{w: &b})
	if !strings.Contains(b.String(), "read-only    1000 B of the 5.7 KiB of regions captured after their launches (17.2%)") {
		t.Errorf("info:\n%s", b.String())
	}
}

// What the write sets line says in each mode: what was carried, or, where every region was
// hashed, what proved read-only would have carried; never both.
func TestWriteSetsLine(t *testing.T) {
	base := func(mode string) *Memory {
		return &Memory{Mode: "hash", WriteSets: mode, AuditEvery: 32, RegionBytes: 4000, ProvedReadOnlyBytes: 1000,
			BytesCarried: 1500, RegionsCarriedProved: 7, RegionsCarriedLearned: 2, WriteSetAudits: 12}
	}
	for mode, want := range map[string]string{
		"":        "    read-only    1000 B of the 3.9 KiB of regions captured after their launches (25.0%) are in regions the kernels' PTX proves they only read (Triton's); recorded before write sets (format 1.11), so they were hashed\n",
		"all":     "    write sets   all: every region hashed after every launch; 1000 B of the 3.9 KiB of regions captured after their launches (25.0%) are in regions the kernels' PTX proves they only read (Triton's), which --write-sets proved would carry\n",
		"proved":  "    write sets   proved: 1.5 KiB of the 3.9 KiB of regions captured after their launches (37.5%) carried, not hashed: 7 regions proved read-only, 2 learned\n",
		"learned": "    write sets   learned: 1.5 KiB of the 3.9 KiB of regions captured after their launches (37.5%) carried, not hashed: 7 regions proved read-only, 2 learned; 12 audits (every 32nd launch of a kernel), 0 misses\n",
	} {
		var lines []string
		base(mode).writeSetsLine(func(name, format string, args ...any) {
			lines = append(lines, fmt.Sprintf("    %-12s %s\n", name, fmt.Sprintf(format, args...)))
		})
		if len(lines) != 1 || lines[0] != want {
			t.Errorf("write sets %q:\n%q\nwant\n%q", mode, lines, want)
		}
		if p := base(mode).problems(); len(p) != 0 {
			t.Errorf("write sets %q: problems %v", mode, p)
		}
	}
	var lines []string
	(&Memory{WriteSets: "all"}).writeSetsLine(func(name, format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	if len(lines) != 1 || lines[0] != "all: every region hashed after every launch" {
		t.Errorf("all, nothing proved: %q", lines)
	}
	for _, n := range []struct {
		n    uint32
		want string
	}{{1, "1st"}, {2, "2nd"}, {3, "3rd"}, {4, "4th"}, {11, "11th"}, {12, "12th"}, {13, "13th"}, {21, "21st"}, {32, "32nd"}, {113, "113th"}} {
		if got := Ordinal(n.n); got != n.want {
			t.Errorf("Ordinal(%d) = %s", n.n, got)
		}
	}
}

// The write-sets recording's memory summary: what was carried, and its unknown state and miss as
// problems, each on a !! line that names where.
func TestWriteSetsProblems(t *testing.T) {
	set := testrec.Open(t, testrec.WriteSets)
	r, err := Summarize(set, "ws")
	if err != nil {
		t.Fatal(err)
	}
	p := r.Processes[0]
	if got := strings.Join(p.Problems(), " "); got != "memory_states_lost regions_carried_unknown write_set_misses" {
		t.Errorf("problems %q", got)
	}
	m := p.Memory
	if m.WriteSets != "learned" || m.AuditEvery != 3 || m.RegionsCarriedProved != 3 || m.RegionsCarriedLearned != 2 || m.RegionsCarriedUnknown != 1 ||
		m.BytesCarried != 512<<10 || m.WriteSetAudits != 1 || m.WriteSetMisses != 1 {
		t.Errorf("memory %+v", m)
	}
	if len(m.Misses) != 1 || fmt.Sprintf("%+v", m.Misses[0]) != "{Kernel:step(float const*, float*) ParamOffsets:[0] AuditSeq:7 SinceSeq:4 AllocationID:3}" {
		t.Errorf("misses %+v", m.Misses)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  !! CARRIED STATES UNKNOWN: 1 region state carried from a state that was lost: no hash, so readers treat each as a lost state\n",
		"  !! WRITE SET MISSES: 1 audit found a region that a learned write set called read-only changed, so its states carried since its last hash may be stale: launch 7, step(float const*, float*), found allocation 3 (parameter offset 0) changed since launch 4 (gpurr diff says when its answer rests on them)\n",
		"    write sets   learned: 512.0 KiB of the 1.3 MiB of regions captured after their launches (38.1%) carried, not hashed: 3 regions proved read-only, 2 learned; 1 audit (every 3rd launch of a kernel), 1 miss; 1 unknown\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("info lacks\n%s\nin\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "read-only    ") {
		t.Errorf("info says what proved read-only would save beside what write sets carried:\n%s", b.String())
	}
}

// A recording cut short before its last counters still shows its unknown states, counted from
// the states themselves.
func TestUnknownFromStates(t *testing.T) {
	d := &recording.Data{
		Process: &pb.Process{Memory: &pb.MemoryConfig{Mode: "hash", WriteSets: "proved"}},
		Stats:   &pb.Stats{},
		Memory: []*pb.MemoryState{{LaunchSeq: 3, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{
			{Carried: pb.RegionState_PROVED_READ_ONLY, Unknown: true}, {Hash: make([]byte, 16)}, {Carried: pb.RegionState_PROVED_READ_ONLY, Unknown: true}}}},
	}
	m := summarizeMemory(d)
	if m.RegionsCarriedUnknown != 2 || strings.Join(m.problems(), " ") != "regions_carried_unknown" {
		t.Errorf("unknown %d, problems %v", m.RegionsCarriedUnknown, m.problems())
	}
	var b strings.Builder
	m.writeProblems(&textWriter{w: &b})
	if want := "  !! CARRIED STATES UNKNOWN: 2 region states carried from states that were lost: no hash, so readers treat each as a lost state\n"; b.String() != want {
		t.Errorf("%q, want %q", b.String(), want)
	}
}

// Where the program's threads waited for staging space (snapshots) or room for hashes in flight
// (hash mode), the overhead line says how much of the agent's time that was (a GPU-bound
// hash-mode run spends seconds there); a small share goes unsaid.
func TestOverheadNamesBackpressure(t *testing.T) {
	for _, c := range []struct {
		wait    uint64
		staging uint64
		want    string
	}{
		{wait: 14e9, want: "of that, 14.000s waiting for room for hashes in flight"},
		{wait: 14e9, staging: 1 << 30, want: "of that, 14.000s waiting for staging space"},
		// The agent's time comes from a sample of launches, the wait is counted whole: a
		// wait longer than the estimate is not passed off as all of it.
		{wait: 16e9, want: "nearly all of that waiting for room for hashes in flight (16.000s in all;"},
		{wait: 1e6},
	} {
		p := &Process{Launches: 1000, AgentNS: 15e9, AgentLaunchNS: 14.5e9,
			Memory: &Memory{Mode: "hash", StagingWaitNS: c.wait, StagingBytes: c.staging}}
		var b strings.Builder
		p.write(&textWriter{w: &b})
		out := b.String()
		if c.want == "" {
			if strings.Contains(out, "waiting for") {
				t.Errorf("staging wait %d ns: a small wait named:\n%s", c.wait, out)
			}
		} else if !strings.Contains(out, c.want) {
			t.Errorf("staging wait %d ns, staging ring %d: want %q in:\n%s", c.wait, c.staging, c.want, out)
		}
	}
}

// The snapshot selection counts its launches in words: one launch, not "1 launches".
func TestSnapshotSelectedCount(t *testing.T) {
	for n, want := range map[uint64]string{1: "1 launch selected for snapshots", 4: "4 launches selected for snapshots"} {
		var b strings.Builder
		(&Memory{Mode: "snapshot", SnapshotSelected: n}).write(&textWriter{w: &b})
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("%d selected: want %q in:\n%s", n, want, b.String())
		}
	}
}

// TestDigestsAndLibrary: info counts a recording's step digests, the most bytes one hashed, and
// the memory NCCL allocated for itself, which the comparisons leave out.
func TestDigestsAndLibrary(t *testing.T) {
	dir := t.TempDir()
	if err := testrec.WriteTrained(dir, testrec.DefaultTrained()); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Summarize(set, dir)
	if err != nil {
		t.Fatal(err)
	}
	m := r.Processes[0].Memory
	if m.Digests != 5 || m.DigestBytes != 3*128<<10 || m.DigestOf != "optimizer" || len(m.Library) != 1 || m.Library[0].Bytes != 2<<20 {
		t.Fatalf("memory summary %+v", m)
	}
	var text strings.Builder
	if err := r.WriteTable(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"digests      5 taken at step boundaries, of the optimizer's allocations, 384.0 KiB at most",
		"library      nccl allocated 2.0 MiB for itself (1 allocation): left out of diff, verify, nan and digests"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("info lacks %q:\n%s", want, text.String())
		}
	}
}
