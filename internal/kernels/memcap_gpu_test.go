package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/recording/memhash"
)

// memcapRig holds what running gpurr_memcap needs on device 0.
type memcapRig struct {
	ctx      *cuda.Context
	fn       cuda.Function
	fnNan    cuda.Function
	stream   *cuda.Stream
	out      *cuda.HostMem
	staging  *cuda.HostMem
	scratch  cuda.DevicePtr
	counters cuda.DevicePtr
	nan      cuda.DevicePtr // nan-scan counters for MaxJobRegions regions
	seq      uint64
}

func newMemcapRig(tb testing.TB, outBytes, stagingBytes, scratchBytes int) *memcapRig {
	tb.Helper()
	if _, err := cuda.Probe(); err != nil {
		tb.Skipf("no CUDA device: %v", err)
	}
	dev, err := cuda.DeviceGet(0)
	must(tb, err)
	r := &memcapRig{}
	r.ctx, err = dev.PrimaryContext()
	must(tb, err)
	tb.Cleanup(func() { r.ctx.Close() })
	mod, err := r.ctx.LoadModule(MemcapPTX())
	must(tb, err)
	r.fn, err = mod.Function(Memcap)
	must(tb, err)
	r.fnNan, err = mod.Function(MemcapNan)
	must(tb, err)
	r.stream, err = r.ctx.NewStream(cuda.StreamNonBlocking)
	must(tb, err)
	r.out, err = r.ctx.HostAlloc(outBytes)
	must(tb, err)
	if stagingBytes > 0 {
		r.staging, err = r.ctx.HostAlloc(stagingBytes)
		must(tb, err)
	}
	r.scratch, err = r.ctx.MemAlloc(scratchBytes)
	must(tb, err)
	r.counters, err = r.ctx.MemAlloc(8)
	must(tb, err)
	must(tb, cuda.MemsetD8(r.counters, 0, 8))
	r.nan, err = r.ctx.MemAlloc(8 * NanCounters * MaxJobRegions)
	must(tb, err)
	must(tb, cuda.MemsetD8(r.nan, 0, 8*NanCounters*MaxJobRegions))
	return r
}

// upload copies host to new device memory, freed when the test ends.
func (r *memcapRig) upload(tb testing.TB, host []byte) cuda.DevicePtr {
	tb.Helper()
	buf, err := r.ctx.MemAlloc(len(host))
	must(tb, err)
	tb.Cleanup(func() { r.ctx.MemFree(buf) })
	must(tb, cuda.CopyHtoD(buf, host))
	must(tb, r.ctx.Synchronize())
	return buf
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// enqueue launches job j on the rig's stream without waiting.
func (r *memcapRig) enqueue(tb testing.TB, j Job) {
	tb.Helper()
	r.seq++
	j.Seq = r.seq
	j.Out = uint64(r.out.Device)
	j.Scratch = uint64(r.scratch)
	j.Counters = uint64(r.counters)
	if j.NanDtypes != 0 {
		j.NanCounts = uint64(r.nan)
	}
	if j.Snapshot {
		j.Staging = uint64(r.staging.Device)
	}
	param, err := j.Encode()
	must(tb, err)
	fn := r.fn
	if j.NanDtypes != 0 {
		fn = r.fnNan
	}
	must(tb, r.stream.Launch(fn, cuda.Dim3{X: j.TotalChunks, Y: 1, Z: 1}, cuda.Dim3{X: BlockThreads, Y: 1, Z: 1}, 0, param))
}

// run launches j and waits for it; it returns the result area.
func (r *memcapRig) run(tb testing.TB, j Job) []byte {
	tb.Helper()
	r.enqueue(tb, j)
	must(tb, r.stream.Synchronize())
	res := r.out.Bytes()
	if done, _ := Done(res, r.seq); !done {
		tb.Fatalf("job %d finished on the stream but did not publish done", r.seq)
	}
	return res
}

func sumAt(b []byte, off int) memhash.Sum {
	le := binary.LittleEndian
	return memhash.Sum{le.Uint32(b[off:]), le.Uint32(b[off+4:]), le.Uint32(b[off+8:]), le.Uint32(b[off+12:])}
}

// TestMemcapHashMatchesCPU runs the GPU hash over random bytes of many
// sizes (tails, odd lengths, unaligned starts), all in one job, and
// compares every chunk hash, and the region hashes folded from them, with
// package memhash.
func TestMemcapHashMatchesCPU(t *testing.T) {
	sizes := []uint64{1, 2, 15, 16, 17, 255, 4095, 4096, 65535, 65536, 65537, 131071, 3*65536 + 7, 1 << 20, 8<<20 + 13}
	offsets := []uint64{0, 1, 3, 8, 16, 0, 5, 0, 0, 0, 7, 0, 9, 0, 1}
	rng := rand.New(rand.NewPCG(1, 2))
	var total uint64
	for i := range sizes {
		total += sizes[i] + offsets[i] + 256
	}
	r := newMemcapRig(t, 1<<20, 0, 1<<20)
	host := make([]byte, total)
	for i := range host {
		host[i] = byte(rng.Uint32())
	}
	buf := r.upload(t, host)

	j := NewJob(sizes...)
	at := uint64(0)
	starts := make([]uint64, len(sizes))
	for i := range sizes {
		starts[i] = at + offsets[i]
		j.Regions[i].Base = uint64(buf) + starts[i]
		at += sizes[i] + offsets[i] + 256
	}
	res := r.run(t, j)
	l := Layout(j.TotalChunks, 0)
	for i, n := range sizes {
		region, chunks := memhash.Hash(host[starts[i] : starts[i]+n])
		gpuChunks := make([]memhash.Sum, len(chunks))
		for k, want := range chunks {
			gpuChunks[k] = sumAt(res, l.ChunkHashes+16*int(j.Regions[i].FirstChunk+uint32(k)))
			if gpuChunks[k] != want {
				t.Errorf("region of %d bytes at +%d, chunk %d: GPU %v, CPU %v", n, offsets[i], k, gpuChunks[k], want)
				break
			}
		}
		if got := memhash.Region(gpuChunks, n); got != region {
			t.Errorf("region of %d bytes at +%d: from GPU chunks %v, CPU %v", n, offsets[i], got, region)
		}
	}
}

// TestMemcapNanScanMatchesCPU counts NaN and Inf on the GPU over random
// bytes (which hold NaN and Inf bit patterns of every type: an f16 is one
// in 32) with planted values, in regions of odd sizes and starts, and
// compares each count with package dtype's decoding of the same bytes. A
// zeroed region with a few planted values checks the kernel's quick test
// that skips counting where no exponent is all ones. It
// runs the job twice (the counters must start from zero again), then with
// one type only (the others must stay zero), and checks the hashes are
// those of a job without nan-scan.
func TestMemcapNanScanMatchesCPU(t *testing.T) {
	sizes := []uint64{1, 3, 17, 4096 + 6, 65536, 65537, 3*65536 + 10, 1 << 20, 4<<20 + 5, 2<<20 + 10}
	offsets := []uint64{0, 2, 4, 8, 0, 16, 6, 0, 2, 8}
	rng := rand.New(rand.NewPCG(3, 4))
	var total uint64
	starts := make([]uint64, len(sizes))
	for i := range sizes {
		starts[i] = total + offsets[i]
		total += sizes[i] + offsets[i] + 256
	}
	host := make([]byte, total)
	for i := range host {
		host[i] = byte(rng.Uint32())
	}
	// Planted values, so every counter sees some beyond the random ones:
	// f64 NaN and Inf, f32 NaN, bf16 -Inf, f16 +Inf, and a run of zeros.
	le := binary.LittleEndian
	le.PutUint64(host[starts[7]+6*256*16+8:], math.Float64bits(math.NaN()))
	le.PutUint64(host[starts[7]+7*256*16:], math.Float64bits(math.Inf(1)))
	le.PutUint32(host[starts[7]+1000:], math.Float32bits(float32(math.NaN())))
	le.PutUint16(host[starts[7]+2002:], 0xff80)
	le.PutUint16(host[starts[7]+4004:], 0x7c00)
	clear(host[starts[7]+8192 : starts[7]+16384])
	sparse := host[starts[9] : starts[9]+sizes[9]]
	clear(sparse)
	specials := []func(off uint64){
		func(off uint64) { le.PutUint32(sparse[off&^3:], math.Float32bits(float32(math.Inf(-1)))) },
		func(off uint64) { le.PutUint32(sparse[off&^3:], 0x7fc00001) },
		func(off uint64) { le.PutUint64(sparse[off&^7:], 0xfff0000000000001) },
		func(off uint64) { le.PutUint16(sparse[off&^1:], 0xfc00) },
		func(off uint64) { le.PutUint16(sparse[off&^1:], 0x7f81) },
	}
	for range 60 {
		specials[rng.IntN(len(specials))](rng.Uint64N(sizes[9] - 8))
	}

	r := newMemcapRig(t, 1<<20, 0, 1<<20)
	buf := r.upload(t, host)

	j := NewJob(sizes...)
	for i := range sizes {
		j.Regions[i].Base = uint64(buf) + starts[i]
	}
	plain := bytes.Clone(r.run(t, j)[:Layout(j.TotalChunks, 0).TransferList])
	check := func(what string, mask uint32) {
		t.Helper()
		j.NanDtypes = mask
		res := r.run(t, j)
		l := Layout(j.TotalChunks, len(sizes))
		if !bytes.Equal(res[l.ChunkHashes:l.TransferList], plain[l.ChunkHashes:]) {
			t.Errorf("%s: chunk hashes differ from a job without nan-scan", what)
		}
		for i, n := range sizes {
			got := l.RegionNanCounts(res, i)
			var want [NanCounters]uint64
			for k, name := range NanScanTypes {
				if mask&(1<<k) != 0 {
					want[2*k], want[2*k+1] = cpuNanCounts(t, name, host[starts[i]:starts[i]+n])
				}
			}
			if got != want {
				t.Errorf("%s: region of %d bytes at +%d: GPU counts %v, CPU %v (NaN, Inf of %v)", what, n, offsets[i], got, want, NanScanTypes)
			}
		}
	}
	check("all types", 0xf)
	check("all types again", 0xf)
	check("bf16 only", 1<<slices.Index(NanScanTypes[:], "bf16"))
}

func cpuNanCounts(t *testing.T, name string, b []byte) (nan, inf uint64) {
	d, err := dtype.Parse(name)
	must(t, err)
	for off := 0; off+d.Size <= len(b); off += d.Size {
		switch v := d.Value(b[off : off+d.Size]); {
		case math.IsNaN(v):
			nan++
		case math.IsInf(v, 0):
			inf++
		}
	}
	return nan, inf
}

// TestMemcapSnapshotCopiesChangedChunks checks the snapshot path: the first
// snapshot copies every chunk, an unchanged region copies none, and after
// two chunks change only those two cross, byte for byte.
func TestMemcapSnapshotCopiesChangedChunks(t *testing.T) {
	const n = 10*memhash.ChunkSize + 100
	r := newMemcapRig(t, 1<<20, 16*memhash.ChunkSize, 1<<20)
	host := make([]byte, n)
	for i := range host {
		host[i] = byte(i * 7)
	}
	buf, err := r.ctx.MemAlloc(n)
	must(t, err)
	defer r.ctx.MemFree(buf)
	shadow, err := r.ctx.MemAlloc(16 * int(Chunks(n)))
	must(t, err)
	defer r.ctx.MemFree(shadow)
	must(t, cuda.CopyHtoD(buf, host))
	must(t, r.ctx.Synchronize())

	snap := func(flags uint32) (transferred []uint32, staging []byte) {
		j := NewJob(n)
		j.Snapshot = true
		j.Regions[0].Base, j.Regions[0].Shadow, j.Regions[0].Flags = uint64(buf), uint64(shadow), flags
		res := r.run(t, j)
		_, count := Done(res, r.seq)
		l := Layout(j.TotalChunks, 0)
		for k := range count {
			transferred = append(transferred, binary.LittleEndian.Uint32(res[l.TransferList+4*int(k):]))
		}
		return transferred, r.staging.Bytes()
	}
	check := func(what string, want []uint32) {
		t.Helper()
		flags := uint32(0)
		if what == "first" { // the shadow holds whatever cuMemAlloc left
			flags = RegionCopyAll
		}
		got, staging := snap(flags)
		slot := make(map[uint32]int)
		for k, c := range got {
			slot[c] = k
		}
		sorted := slices.Sorted(slices.Values(got))
		if !slices.Equal(sorted, want) {
			t.Fatalf("%s snapshot copied chunks %v, want %v", what, sorted, want)
		}
		for _, c := range want {
			lo := int(c) * memhash.ChunkSize
			hi := min(lo+memhash.ChunkSize, n)
			k := slot[c]
			if !bytes.Equal(staging[k*memhash.ChunkSize:k*memhash.ChunkSize+hi-lo], host[lo:hi]) {
				t.Fatalf("%s snapshot: staging slot %d differs from chunk %d", what, k, c)
			}
		}
	}
	all := make([]uint32, Chunks(n))
	for i := range all {
		all[i] = uint32(i)
	}
	check("first", all)
	check("unchanged", nil)
	host[3*memhash.ChunkSize+5] ^= 1
	host[n-1] ^= 0x80
	must(t, cuda.CopyHtoD(buf, host))
	// A copy from pageable memory may return before its DMA lands, and the
	// rig's stream does not wait for the legacy stream: wait here.
	must(t, r.ctx.Synchronize())
	check("changed", []uint32{3, 10})
}

// BenchmarkMemcap measures, in one run on device 0, the hash and snapshot
// throughput against their baselines: a device-to-device copy of the same
// bytes, and cuMemcpyDtoHAsync into pinned memory. It reports medians of
// CUDA-event times and the ratios the memory-capture issue sets targets
// for (hash ≥ 0.5 × copy, snapshot ≥ 0.8 × DtoH), and the time nan-scan
// of f32 and bf16 adds to the hash (nan/hash: its time over the hash's).
func BenchmarkMemcap(b *testing.B) {
	const hashBytes, snapBytes, repeats = 1 << 30, 256 << 20, 9
	r := newMemcapRig(b, 1<<20+16*int(Chunks(hashBytes))*2, snapBytes, 16*int(Chunks(hashBytes)))
	src, err := r.ctx.MemAlloc(hashBytes)
	must(b, err)
	dst, err := r.ctx.MemAlloc(hashBytes)
	must(b, err)
	shadow, err := r.ctx.MemAlloc(16 * int(Chunks(snapBytes)))
	must(b, err)
	must(b, cuda.MemsetD8(src, 0x5a, hashBytes))
	pinned, err := r.ctx.HostAlloc(snapBytes)
	must(b, err)
	start, err := r.ctx.NewEvent(cuda.EventDefault)
	must(b, err)
	end, err := r.ctx.NewEvent(cuda.EventDefault)
	must(b, err)
	median := func(op func()) time.Duration {
		var ds []time.Duration
		for range repeats {
			must(b, start.Record(r.stream))
			op()
			must(b, end.Record(r.stream))
			must(b, end.Synchronize())
			d, err := cuda.Elapsed(start, end)
			must(b, err)
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	hashJob := NewJob(hashBytes)
	hashJob.Regions[0].Base = uint64(src)
	nanJob := hashJob
	nanJob.NanDtypes, _, err = NanScanMask([]string{"f32", "bf16"})
	must(b, err)
	snapJob := NewJob(snapBytes)
	snapJob.Snapshot = true
	snapJob.Regions[0].Base, snapJob.Regions[0].Shadow, snapJob.Regions[0].Flags = uint64(src), uint64(shadow), RegionCopyAll
	for b.Loop() {
		copyT := median(func() { must(b, r.stream.CopyDtoD(dst, src, hashBytes)) })
		hashT := median(func() { r.enqueue(b, hashJob) })
		nanT := median(func() { r.enqueue(b, nanJob) })
		dtohT := median(func() { must(b, r.stream.CopyDtoHost(pinned, 0, src, snapBytes)) })
		snapT := median(func() { r.enqueue(b, snapJob) })
		gbs := func(n int, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e9 }
		b.ReportMetric(gbs(hashBytes, hashT), "hash-GB/s")
		b.ReportMetric(gbs(hashBytes, copyT), "copy-GB/s")
		b.ReportMetric(copyT.Seconds()/hashT.Seconds(), "hash/copy")
		b.ReportMetric(gbs(hashBytes, nanT), "nan-scan-GB/s")
		b.ReportMetric(nanT.Seconds()/hashT.Seconds(), "nan/hash")
		b.ReportMetric(gbs(snapBytes, snapT), "snapshot-GB/s")
		b.ReportMetric(gbs(snapBytes, dtohT), "dtoh-GB/s")
		b.ReportMetric(dtohT.Seconds()/snapT.Seconds(), "snapshot/dtoh")
		fmt.Printf("memcap: hash 1 GiB %v (%.0f GB/s) vs D2D copy %v: ratio %.2f (target >= 0.5); with nan-scan f32,bf16 %v (%.2fx the hash's time); snapshot 256 MiB %v (%.1f GB/s) vs pinned DtoH %v: ratio %.2f (target >= 0.8)\n",
			hashT, gbs(hashBytes, hashT), copyT, copyT.Seconds()/hashT.Seconds(), nanT, nanT.Seconds()/hashT.Seconds(), snapT, gbs(snapBytes, snapT), dtohT, dtohT.Seconds()/snapT.Seconds())
	}
}

// TestMemcapBatch hashes three jobs, each with its own result area, scratch
// and counters, in one launch: every job publishes its own chunk hashes and
// done flag, equal to package memhash's. One job has a region of no bytes (a
// carried one) between two others; the batch runs twice, so each job's
// counters must be zero again after the first.
func TestMemcapBatch(t *testing.T) {
	rigs := []*memcapRig{newMemcapRig(t, 1<<20, 0, 1<<20), newMemcapRig(t, 1<<20, 0, 1<<20), newMemcapRig(t, 1<<20, 0, 1<<20)}
	sizes := [][]uint64{{65536*2 + 9, 0, 300}, {17}, {1 << 20, 4096}}
	rng := rand.New(rand.NewPCG(5, 6))
	jobs := make([]Job, len(rigs))
	hosts := make([][][]byte, len(rigs))
	var blocks uint32
	for k, r := range rigs {
		jobs[k] = NewJob(sizes[k]...)
		for i, n := range sizes[k] {
			host := make([]byte, n)
			for b := range host {
				host[b] = byte(rng.Uint32())
			}
			hosts[k] = append(hosts[k], host)
			if n > 0 {
				jobs[k].Regions[i].Base = uint64(r.upload(t, host))
			}
		}
		blocks += jobs[k].TotalChunks
	}
	r0 := rigs[0]
	for round := range 2 {
		for k, r := range rigs {
			r.seq++
			jobs[k].Seq = r.seq + uint64(100*k)
			jobs[k].Out = uint64(r.out.Device)
			jobs[k].Scratch = uint64(r.scratch)
			jobs[k].Counters = uint64(r.counters)
		}
		param, err := EncodeBatch(jobs...)
		must(t, err)
		must(t, r0.stream.Launch(r0.fn, cuda.Dim3{X: blocks, Y: 1, Z: 1}, cuda.Dim3{X: BlockThreads, Y: 1, Z: 1}, 0, param))
		must(t, r0.stream.Synchronize())
		for k, r := range rigs {
			res := r.out.Bytes()
			if done, _ := Done(res, jobs[k].Seq); !done {
				t.Fatalf("round %d: job %d of the batch did not publish done", round, k)
			}
			l := Layout(jobs[k].TotalChunks, 0)
			for i, host := range hosts[k] {
				_, chunks := memhash.Hash(host)
				for c, want := range chunks {
					if got := sumAt(res, l.ChunkHashes+16*int(jobs[k].Regions[i].FirstChunk+uint32(c))); got != want {
						t.Fatalf("round %d: job %d, region %d (%d bytes), chunk %d: GPU %v, CPU %v", round, k, i, len(host), c, got, want)
					}
				}
			}
		}
	}
}
