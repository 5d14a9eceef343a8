package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func TestWriteClassSortsDriverCallsByWhatTheyWrite(t *testing.T) {
	for name, want := range map[string]int{
		"cuMemsetD8_v2":             1,
		"cuMemsetD32Async_ptsz":     1,
		"cuMemsetD2D8_v2":           1,
		"cuMemcpyHtoD_v2":           1,
		"cuMemcpyHtoDAsync_v2_ptsz": 1,
		"cuMemcpyDtoD_v2_ptds":      1,
		"cuMemcpyPeerAsync":         1,
		"cuMemcpy":                  1,
		"cuMemcpy_ptds":             1,
		"cuMemcpyAsync":             1,
		"cuMemcpyAsync_ptsz":        1,
		"cuMemcpy2DAsync_v2":        2,
		"cuMemcpy3DPeer":            2,
		"cuMemcpyBatchAsync":        2,
		"cuMemcpyAtoD_v2":           2,
		"cuStreamWriteValue32_v2":   2,
		"cuStreamBatchMemOp_ptsz":   2,
		"cuMemcpyDtoH_v2":           3, // writes no device memory, but the program looks at it after
		"cuMemcpyDtoHAsync_v2_ptsz": 3,
		"cuMemcpyAtoH_v2":           3,
		"cuStreamSynchronize_ptsz":  3,
		"cuCtxSynchronize_v2":       3,
		"cuEventQuery":              3,
		"cuStreamBeginCapture_v2":   3,
		"cuStreamDestroy_v2":        3,
		"cuStreamWaitEvent":         3,
		"cuEventRecordWithFlags":    3,
		"cuLaunchKernel":            0,
		"cuMemAlloc_v2":             0,
	} {
		if got := writeClass(name); got != want {
			t.Errorf("%s: class %d, want %d", name, got, want)
		}
	}
}

// TestCallOrder: what a driver call waits for while hashes run beside the program, and where
// it names its stream (the offsets are checked against CUDA's headers by layoutcheck).
func TestCallOrder(t *testing.T) {
	const none, stream, host = 0, 1, 2
	for name, want := range map[string][2]int{
		"cuEventRecord":                {stream, 8},
		"cuEventRecord_ptsz":           {stream, 8},
		"cuEventRecordWithFlags_ptsz":  {stream, 8},
		"cuStreamSynchronize":          {stream, 0},
		"cuStreamDestroy_v2":           {host, 0},
		"cuCtxDestroy_v2":              {host, -1},
		"cuDevicePrimaryCtxReset_v2":   {host, -1},
		"cuMemsetD8Async":              {none, 24},
		"cuMemsetD32Async_ptsz":        {none, 24},
		"cuMemcpyAsync_ptsz":           {none, 24},
		"cuMemcpyHtoDAsync_v2":         {none, 24},
		"cuMemcpyDtoDAsync_v2_ptsz":    {none, 24},
		"cuMemsetD2D8Async":            {none, 40},
		"cuMemsetD2D8_v2":              {none, -1},
		"cuMemcpyPeerAsync":            {none, 40},
		"cuMemcpy2DAsync_v2":           {none, 8},
		"cuMemcpy3DPeerAsync":          {none, 8},
		"cuStreamWriteValue32_v2":      {none, 0},
		"cuStreamBatchMemOp_ptsz":      {none, 0},
		"cuMemcpyHtoD_v2":              {none, -1}, // synchronous: the host waits
		"cuMemcpyAsyncX":               {none, -1}, // a longer name is another call
		"cuStreamSynchronizeSomething": {none, -1},
		"cuCtxSynchronize":             {none, -1},
		"cuLaunchKernel":               {none, -1},
	} {
		order, at := callOrder(name)
		if order != want[0] || at != want[1] {
			t.Errorf("%s: order %d, stream at %d; want %d, %d", name, order, at, want[0], want[1])
		}
	}
}

func hashOf(b byte) [16]byte {
	var h [16]byte
	for i := range h {
		h[i] = b + byte(i)
	}
	return h
}

// writeSetRecorder is a test recorder whose memory capture carries and learns.
func writeSetRecorder(t *testing.T, mode string) *recorder {
	r := testRecorder(t)
	r.mem.writeSets = mode
	r.mem.last = map[uint64]allocState{}
	r.mem.kernels = map[uint64]*kernelWords{}
	return r
}

func lastState(t *testing.T, r *recorder, seq uint64) *pb.MemoryState {
	t.Helper()
	for _, s := range r.batch.Memory {
		if s.LaunchSeq == seq {
			return s
		}
	}
	t.Fatalf("no memory state for launch %d", seq)
	return nil
}

func TestCarriedRegionTakesTheStateOfTheJobTheAgentNamed(t *testing.T) {
	r := writeSetRecorder(t, "proved")
	const a, b = 0x7f0000000000, 0x7f0000100000
	v, _ := cannedJob(1, 1, 7, false, []cannedJobRegion{
		{addr: a, size: 100, allocID: 1, chunkHashes: [][16]byte{hashOf(1)}},
		{addr: b, size: 100, allocID: 2, chunkHashes: [][16]byte{hashOf(2)}},
	}, nil)
	jobToWriter(r, v)
	first := lastState(t, r, 1)
	// Launch 2 carries a (proved read-only) from job 1 and hashes b.
	v, _ = cannedJob(2, 2, 7, false, []cannedJobRegion{
		{addr: a, size: 100, allocID: 1, prevJob: 1, carry: 1},
		{addr: b, size: 100, allocID: 2, prevJob: 1, chunkHashes: [][16]byte{hashOf(3)}},
	}, nil)
	jobToWriter(r, v)
	s := lastState(t, r, 2)
	if len(s.Regions) != 2 {
		t.Fatalf("launch 2: %d regions", len(s.Regions))
	}
	ca, hb := s.Regions[0], s.Regions[1]
	if ca.Carried != pb.RegionState_PROVED_READ_ONLY || ca.CarriedFrom != 1 || ca.Unknown ||
		!bytes.Equal(ca.Hash, first.Regions[0].Hash) || len(ca.ChunkHashes) != 0 {
		t.Errorf("carried region: %v, want launch 1's hash %x and no chunk hashes (launch 1's state has them)", ca, first.Regions[0].Hash)
	}
	if hb.Carried != pb.RegionState_NOT_CARRIED || bytes.Equal(hb.Hash, first.Regions[1].Hash) || len(hb.ChunkHashes) != 16 {
		t.Errorf("hashed region: %v", hb)
	}
	// Launch 3 names job 5, whose results never came (lost): unknown, not launch 1's state.
	v, _ = cannedJob(3, 3, 7, false, []cannedJobRegion{
		{addr: a, size: 100, allocID: 1, prevJob: 5, carry: 1},
	}, nil)
	jobToWriter(r, v)
	if u := lastState(t, r, 3).Regions[0]; !u.Unknown || len(u.Hash) != 0 {
		t.Errorf("carried from a lost job: %v, want unknown with no hash", u)
	}
	st := &r.mem.stats
	if st.RegionsCarriedProved != 2 || st.RegionsCarriedUnknown != 1 || st.BytesCarried != 200 {
		t.Errorf("stats: proved %d unknown %d bytes %d, want 2 1 200", st.RegionsCarriedProved, st.RegionsCarriedUnknown, st.BytesCarried)
	}
	// A freed allocation's state is forgotten a frame after the free, not at once.
	r.mem.freed(1)
	r.mem.forgetFreed()
	if _, ok := r.mem.last[1]; !ok {
		t.Fatal("allocation 1 forgotten in the frame it was freed")
	}
	r.mem.forgetFreed()
	if _, ok := r.mem.last[1]; ok {
		t.Error("allocation 1 still held two frames after its free")
	}
}

func TestLearnedWriteSetsLearnAndAuditsFindMisses(t *testing.T) {
	r := writeSetRecorder(t, "learned")
	r.mem.kernel(9, "k", 16, nil) // two pointer words, no PTX
	const in, out = 0x7f0000000000, 0x7f0000100000
	job := uint64(0)
	lastJob := map[uint64]uint64{} // as the agent keeps it: the job that last hashed each allocation
	launch := func(seq uint64, inHash, outHash byte, carryIn, audit bool) {
		job++
		regs := []cannedJobRegion{
			{addr: in, size: 64, allocID: 1, prevJob: lastJob[1], chunkHashes: [][16]byte{hashOf(inHash)}},
			{addr: out, size: 64, allocID: 2, prevJob: lastJob[2], chunkHashes: [][16]byte{hashOf(outHash)}},
		}
		if carryIn {
			regs[0].carry, regs[0].chunkHashes = 2, nil
		}
		for _, g := range regs {
			if g.carry == 0 {
				lastJob[g.allocID] = job
			}
		}
		v, _ := cannedJob(seq, job, 9, audit, regs, [][2]uint32{{0, 0}, {8, 1}})
		jobToWriter(r, v)
	}
	launch(1, 1, 10, false, false) // nothing known before: nothing learned
	for seq := uint64(2); seq <= 4; seq++ {
		launch(seq, 1, byte(10+seq), false, false)
	}
	if proved, learned := kernelWordsPublished(r.mem, 9, 0); proved || !learned {
		t.Fatalf("word 0 after 3 unchanged launches: proved %v learned %v, want learned", proved, learned)
	}
	if _, learned := kernelWordsPublished(r.mem, 9, 1); learned {
		t.Fatal("word 1, whose region changed every launch, learned read-only")
	}
	launch(5, 1, 20, true, false)
	if s := lastState(t, r, 5).Regions[0]; s.Carried != pb.RegionState_LEARNED_READ_ONLY || s.CarriedFrom != 4 {
		t.Errorf("launch 5's input: %v, want carried (learned) from launch 4", s)
	}
	if len(r.batch.WriteSetMisses) != 0 {
		t.Fatalf("misses before any audit: %v", r.batch.WriteSetMisses)
	}
	// The audit at launch 6 hashes the input and finds it changed since launch 4.
	launch(6, 2, 21, false, true)
	if len(r.batch.WriteSetMisses) != 1 {
		t.Fatalf("misses after the audit: %v", r.batch.WriteSetMisses)
	}
	m := r.batch.WriteSetMisses[0]
	if m.KernelId != 9 || m.AuditSeq != 6 || m.SinceSeq != 4 || m.AllocationId != 1 || len(m.ParamOffsets) != 1 || m.ParamOffsets[0] != 0 {
		t.Errorf("miss %v, want kernel 9, audit 6, since 4, allocation 1, offset 0", m)
	}
	if _, learned := kernelWordsPublished(r.mem, 9, 0); learned {
		t.Error("word 0 still learned read-only after a miss")
	}
	if r.mem.stats.WriteSetAudits != 1 || r.mem.stats.WriteSetMisses != 1 {
		t.Errorf("audits %d misses %d, want 1 1", r.mem.stats.WriteSetAudits, r.mem.stats.WriteSetMisses)
	}
	// Never learned again: it changed once.
	for seq := uint64(7); seq <= 12; seq++ {
		launch(seq, 2, byte(30+seq), false, false)
	}
	if _, learned := kernelWordsPublished(r.mem, 9, 0); learned {
		t.Error("word 0 learned again after a miss")
	}
}

func TestProvedWriteSetsDoNotLearn(t *testing.T) {
	r := writeSetRecorder(t, "proved")
	r.mem.kernel(9, "k", 16, nil)
	for seq := uint64(1); seq <= 6; seq++ {
		v, _ := cannedJob(seq, seq, 9, false, []cannedJobRegion{
			{addr: 0x7f0000000000, size: 64, allocID: 1, prevJob: seq - 1, chunkHashes: [][16]byte{hashOf(1)}},
		}, [][2]uint32{{0, 0}})
		jobToWriter(r, v)
	}
	if _, learned := kernelWordsPublished(r.mem, 9, 0); learned {
		t.Error("--write-sets proved learned a word")
	}
}

// gpurr's demo kernels: saxpy stores through y (parameter 3, bytes 16-24) only; its x and its
// scalars are proved read-only. A module whose PTX does not parse proves nothing.
func TestModuleWriteSets(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "kernels", "ptx", "demo.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	sets := moduleWriteSets(text)
	ws := sets["gpurr_demo_saxpy"]
	if ws == nil {
		t.Fatalf("no write set for saxpy: %v", sets)
	}
	// (n u32 @0, a f32 @4, x u64 @8, y u64 @16)
	for _, c := range []struct {
		off, size int
		write     bool
	}{{0, 4, false}, {4, 4, false}, {8, 8, false}, {16, 8, true}} {
		if got := ws.MayWriteAt(c.off, c.size); got != c.write {
			t.Errorf("saxpy bytes %d-%d: may write %v, want %v", c.off, c.off+c.size, got, c.write)
		}
	}
	if moduleWriteSets([]byte("not PTX")) != nil {
		t.Error("a module that is not PTX proved something")
	}
}

// The proved words of saxpy reach the writer's kernel table: x (word 1) and the scalars
// (word 0) proved read-only, y (word 2) not.
func TestKernelTakesProvedWords(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "kernels", "ptx", "demo.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	r := writeSetRecorder(t, "proved")
	r.mem.kernel(4, "gpurr_demo_saxpy", 24, moduleWriteSets(text)["gpurr_demo_saxpy"])
	for w, want := range []bool{true, true, false} {
		if proved, _ := kernelWordsPublished(r.mem, 4, uint32(w)); proved != want {
			t.Errorf("word %d proved %v, want %v", w, proved, want)
		}
	}
}

// BenchmarkWriterHashJob is the writer's cost per completed hash job: 8 regions of 4 MiB (64
// chunks each), folded into region hashes and states, under proved and learned write sets
// (learning compares each region with its state before the launch). The writer must keep up
// with the GPU's jobs or the results ring fills and the program waits (backpressure).
func BenchmarkWriterHashJob(b *testing.B) {
	for _, mode := range []string{"proved", "learned"} {
		b.Run(mode, func(b *testing.B) {
			r := testRecorder(&testing.T{})
			r.mem.writeSets, r.mem.last, r.mem.kernels = mode, map[uint64]allocState{}, map[uint64]*kernelWords{}
			r.mem.kernel(1, "k", 64, nil)
			var regs []cannedJobRegion
			var pointers [][2]uint32
			for i := range 8 {
				g := cannedJobRegion{addr: uint64(0x7f0000000000 + i<<24), size: 4 << 20, allocID: uint64(i + 1)}
				for c := range 64 {
					g.chunkHashes = append(g.chunkHashes, hashOf(byte(i*64+c)))
				}
				regs = append(regs, g)
				pointers = append(pointers, [2]uint32{uint32(8 * i), uint32(i)})
			}
			v, _ := cannedJob(1, 1, 1, false, regs, pointers)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				renumberJob(v, uint64(i+1), uint64(i+1), uint64(i)) // learning compares with the job before
				jobToWriter(r, v)
				if len(r.batch.Memory) > 1024 {
					r.batch.Memory = r.batch.Memory[:0]
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(8*64), "ns/chunk")
		})
	}
}

// BenchmarkWriterHashFrame is the writer's cost of writing hash-mode states to the events
// file: frames of 256 states of 8 regions of 4 MiB (64 chunk hashes each), as the training
// step's hash mode makes them (about 750,000 chunk hashes, 12 MB, per step).
func BenchmarkWriterHashFrame(b *testing.B) {
	r := testRecorder(&testing.T{})
	rng := rand.New(rand.NewPCG(1, 2))
	states := make([]*pb.MemoryState, 256)
	for i := range states {
		s := &pb.MemoryState{LaunchSeq: uint64(i + 1), Point: pb.MemoryState_AFTER}
		for range 8 {
			ch := make([]byte, 64*16)
			for k := 0; k < len(ch); k += 8 { // chunk hashes are random bytes: nothing for the compressor to find
				binary.LittleEndian.PutUint64(ch[k:], rng.Uint64())
			}
			s.Regions = append(s.Regions, &pb.RegionState{Hash: ch[:16], ChunkHashes: ch})
		}
		states[i] = s
	}
	b.ResetTimer()
	for range b.N {
		r.batch.Memory = append(r.batch.Memory[:0], states...)
		r.writeFrame()
	}
	chunks := float64(256 * 8 * 64)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/chunks, "ns/chunk")
}

// A module loading whose cubin Triton's cache holds with its PTX gives its kernels their
// proved words at their first launch (saxpy: n, a and x, not y); before any Triton kernel is
// cached, modules are not read at all, and a kernel gets nothing.
func TestLoadedModuleGivesProvedWordsAtFirstLaunch(t *testing.T) {
	image := demoCubin(t)
	text, err := os.ReadFile(filepath.Join("..", "kernels", "ptx", "demo.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	t.Setenv("TRITON_CACHE_DIR", root)
	t.Setenv("TORCHINDUCTOR_CACHE_DIR", filepath.Join(root, "none"))
	startLoadedWriteSets()
	if proved, _ := moduleLoaded(image, "gpurr_demo_saxpy", 24); proved != nil {
		t.Fatalf("empty cache, yet proved words %b", proved)
	}
	time.Sleep(10 * time.Millisecond) // a new modification time for the cache folder
	dir := filepath.Join(root, "ABCD")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpurr_demo_saxpy.cubin"), image, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpurr_demo_saxpy.ptx"), text, 0o600); err != nil {
		t.Fatal(err)
	}
	proved, anywhere := moduleLoaded(image, "gpurr_demo_saxpy", 24)
	if len(proved) != 1 || proved[0] != 0b011 || anywhere {
		t.Errorf("saxpy's words: proved %b, anywhere %v; want words 0 and 1 (n, a; x), not 2 (y)", proved, anywhere)
	}
	if proved, _ := moduleLoaded([]byte("\x7fELF not a cubin"), "gpurr_demo_saxpy", 24); len(proved) != 1 {
		t.Errorf("an unreadable module changed what saxpy's module proved: %b", proved)
	}
	// The writer takes the module's PTX and write sets once, as its record arrives.
	sum := sha256.Sum256(image)
	a, ok := takeLoadedModule(hex.EncodeToString(sum[:]))
	if !ok || !bytes.Equal(a.ptx, text) || a.sets["gpurr_demo_saxpy"] == nil {
		t.Errorf("the writer took %v (ptx %d bytes, sets %v), want saxpy's module", ok, len(a.ptx), a.sets)
	}
	if _, again := takeLoadedModule(hex.EncodeToString(sum[:])); again {
		t.Error("the module's analysis was held after the writer took it")
	}
}
