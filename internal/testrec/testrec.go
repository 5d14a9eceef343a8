// Package testrec writes synthetic gpurr recordings for tests. They have
// the shape of a real one (two ranks of a PyTorch program: eager launches,
// a captured CUDA graph replayed twice, Python and native callstacks,
// content-addressed modules) and are byte-for-byte deterministic, so golden
// outputs stay stable. Recordings made on a GPU machine are committed under
// testdata/recordings; these cover what those cannot, such as damaged files.
package testrec

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Ranks is the number of processes in a synthetic recording.
const Ranks = 2

// Name is the directory name of rank's process inside the recording.
func Name(rank int) string { return fmt.Sprintf("gpu-box-%d", pid(rank)) }

func pid(rank int) uint32 { return 4242 + uint32(rank) }

// Clock values: every rank starts at the same wall-clock instant, a few
// microseconds apart on the recording clock.
const (
	startNS     = 1_000_000_000
	startUnixNS = 1_795_000_000_000_000_000
	launchGapNS = 25_000 // host time between consecutive API calls
	queueNS     = 6_000  // host call to kernel start
)

// Handles the driver would hand out.
const (
	contextHandle = 0x55d0_0000_1000
	defaultStream = 0 // legacy default stream
	defaultSID    = 7
	captureStream = 0x5581_2000_0a00
	captureSID    = 13
	graphExec     = 0x5581_3000_0100
	capturedGraph = 1
	clonedGraph   = 3 // cuGraphClone of the captured graph
	execGraph     = 4 // the instantiated graph whose nodes run
)

type module struct {
	label string
	size  int
}

var modules = []module{
	{"libtorch_cuda fatbin", 12 << 10},
	{"libcublasLt fatbin", 20 << 10},
	{"triton cubin", 4 << 10},
}

// image is a module's synthetic image: deterministic bytes, so its digest
// (and the modules/ file name) never changes.
func image(m module) []byte {
	return []byte(("\x7fELF synthetic cubin: " + m.label + "\n" + strings.Repeat(m.label+" ", m.size))[:m.size])
}

// Images returns the module images the recording stores.
func Images() [][]byte {
	out := make([][]byte, len(modules))
	for i, m := range modules {
		out[i] = image(m)
	}
	return out
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type kernelSpec struct {
	name      string
	module    int
	params    []uint32 // sizes, laid out with natural alignment
	gridX     uint32
	block     uint32
	registers uint32
	gpuNS     uint64
}

// The kernels a small training step launches: one mangled C++ kernel, a
// raw CUDA kernel, a cuBLAS kernel with a long unmangled name, a Triton one.
var kernels = []kernelSpec{
	{"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_", 0, []uint32{4, 4, 8}, 1024, 128, 16, 2_100},
	{"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 1, []uint32{8, 8, 8, 4, 4, 4}, 132, 384, 168, 41_500},
	{"triton_poi_fused_add_mul_0", 2, []uint32{8, 8, 8, 4}, 256, 256, 24, 3_300},
	{"_Z10add_kernelPfPKfS1_i", 0, []uint32{8, 8, 8, 4}, 512, 256, 12, 1_700},
}

const (
	kFill = iota
	kGemm
	kTriton
	kAdd
)

func kernelID(k int) uint64 { return uint64(k) + 1 }

func layout(sizes []uint32) (params []*pb.ParamInfo, total uint32) {
	for _, s := range sizes {
		total = (total + s - 1) / s * s
		params = append(params, &pb.ParamInfo{Offset: total, Size: s})
		total += s
	}
	return params, total
}

// fnv64 is FNV-1a 64 over parts with a 0xFF byte between them. The
// synthetic callstacks take their ids from it over their frames' text,
// not from recording.CallstackID: the goldens were made with these ids.
func fnv64(parts ...string) uint64 {
	h := fnv.New64a()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0xFF})
		}
		h.Write([]byte(p))
	}
	return h.Sum64()
}

func kernelRecords() []*pb.Kernel {
	images := Images()
	var out []*pb.Kernel
	for i, k := range kernels {
		sum := digest(images[k.module])
		params, total := layout(k.params)
		out = append(out, &pb.Kernel{
			Id:           kernelID(i),
			Identity:     recording.KernelIdentity(sum, k.name),
			Name:         k.name,
			ModuleSha256: sum,
			Params:       params,
			ParamBytes:   total,
		})
	}
	return out
}

func moduleRecords(rank int) []*pb.Module {
	images := Images()
	var out []*pb.Module
	for i := range modules {
		var names []string
		for _, k := range kernels {
			if k.module == i {
				names = append(names, k.name)
			}
		}
		out = append(out, &pb.Module{
			Sha256:        digest(images[i]),
			CuptiModuleId: uint32(i + 1),
			Size:          uint64(len(images[i])),
			KernelNames:   names,
			HostNs:        startNS + uint64(rank)*1000 + uint64(i+1)*1000,
			ContextUid:    1,
			Stored:        true,
		})
	}
	return out
}

func py(file string, line uint32, fn string) *pb.Frame {
	return &pb.Frame{Kind: pb.Frame_PYTHON, File: file, Line: line, Function: fn}
}

func native(object, fn string, offset uint64) *pb.Frame {
	return &pb.Frame{Kind: pb.Frame_NATIVE, File: object, Function: fn, Pc: 0x7f10_0000_0000 + offset, Offset: offset}
}

const (
	script = "/home/ada/train.py"
	linear = "/home/ada/.venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"
)

// Callstacks, innermost frame first.
var (
	csFill = []*pb.Frame{
		native("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuLaunchKernel", 0x2f1a40),
		native("/home/ada/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so", "at::native::fill_kernel_cuda(at::TensorIterator&, c10::Scalar const&)", 0x1a2b3c0),
		py(script, 18, "init_weights"),
		py(script, 40, "main"),
		py(script, 52, "<module>"),
	}
	csGemm = []*pb.Frame{
		native("/home/ada/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13", "cublasLtMatmul", 0x91c200),
		native("/home/ada/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so", "at::cuda::blas::gemm<float>(char, char, long, long, long, float, float const*, long, float const*, long, float, float*, long)", 0x2c4d5e0),
		py(linear, 125, "Linear.forward"),
		py(script, 25, "Model.forward"),
		py(script, 41, "main"),
		py(script, 52, "<module>"),
	}
	csTriton = []*pb.Frame{
		py("/tmp/torchinductor_ada/xy/cxyabc.py", 31, "call"),
		py(script, 27, "Model.forward"),
		py(script, 41, "main"),
		py(script, 52, "<module>"),
	}
	csCapture = []*pb.Frame{
		py(script, 33, "capture_step"),
		py(script, 44, "main"),
		py(script, 52, "<module>"),
	}
	csReplay = []*pb.Frame{
		py(script, 37, "replay_step"),
		py(script, 46, "main"),
		py(script, 52, "<module>"),
	}
	csNative = []*pb.Frame{
		native("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuLaunchKernel", 0x2f1a40),
		native("/home/ada/.venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so", "c10::cuda::CUDACachingAllocator::emptyCache()", 0x4410),
	}
)

func callstack(frames []*pb.Frame) *pb.Callstack {
	var texts []string
	var python, native bool
	for _, f := range frames {
		texts = append(texts, recording.FrameText(f))
		if f.Kind == pb.Frame_PYTHON {
			python = true
		} else {
			native = true
		}
	}
	source := "python+native"
	switch {
	case !python:
		source = "native"
	case !native:
		source = "python"
	}
	return &pb.Callstack{Id: fnv64(texts...), Source: source, Frames: frames}
}

// params packs a launch's parameter buffer: pointers into this rank's
// device memory, then small integers.
func params(rank, k int, salt uint64) []byte {
	info, total := layout(kernels[k].params)
	buf := make([]byte, total)
	for i, p := range info {
		switch p.Size {
		case 8:
			binary.LittleEndian.PutUint64(buf[p.Offset:], 0x7f3a_0000_0000+uint64(rank)<<32+uint64(i)<<20+salt<<12)
		case 4:
			binary.LittleEndian.PutUint32(buf[p.Offset:], 4096>>i+uint32(salt))
		}
	}
	return buf
}
