package recording_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func pyFrame(file string, line uint32, fn string) *pb.Frame {
	return &pb.Frame{Kind: pb.Frame_PYTHON, File: file, Line: line, Function: fn}
}

func nativeFrame(object, fn string, offset uint64) *pb.Frame {
	return &pb.Frame{Kind: pb.Frame_NATIVE, File: object, Function: fn, Offset: offset}
}

func TestWhere(t *testing.T) {
	torch := "/usr/lib/python3.12/site-packages/torch/nn/functional.py"
	for _, c := range []struct {
		name   string
		frames []*pb.Frame
		want   string
	}{
		{"the program's own line", []*pb.Frame{pyFrame("hang.py", 30, "main"), pyFrame("hang.py", 38, "<module>")}, "hang.py:30 main"},
		{"library code below it", []*pb.Frame{nativeFrame("/usr/lib/libcuda.so.1", "", 0x10), pyFrame(torch, 2380, "linear"), pyFrame("model.py", 12, "forward")},
			"model.py:12 forward via " + torch + ":2380 linear"},
		{"library code only", []*pb.Frame{pyFrame(torch, 2380, "linear")}, torch + ":2380 linear"},
		{"native frames", []*pb.Frame{nativeFrame("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "", 0x10), nativeFrame("/opt/app/bin/solver", "launch_spin", 0x1a2b),
			nativeFrame("/opt/app/bin/solver", "", 0x1100), nativeFrame("/opt/app/bin/solver", "main", 0x1000), nativeFrame("/lib/libc.so.6", "__libc_start_main", 0x29d90)},
			"solver+0x1a2b launch_spin, called from solver+0x1100, called from solver+0x1000 main"},
		{"only the CUDA libraries", []*pb.Frame{nativeFrame("/usr/lib/libcudart.so.13", "cudaLaunchKernel", 0x10)}, ""},
	} {
		if got := recording.Where(&pb.Callstack{Frames: c.frames}); got != c.want {
			t.Errorf("%s: Where = %q, want %q", c.name, got, c.want)
		}
	}
	if got := recording.Where(nil); got != "" {
		t.Errorf("Where(nil) = %q", got)
	}
}

func TestHangReport(t *testing.T) {
	const s = uint64(time.Second)
	hang := &pb.Hang{HostNs: 20 * s, TimeoutNs: 5 * s, Killed: true,
		Launch: &pb.HangLaunch{Seq: 11, HostNs: 10 * s, KernelId: 2, Device: 0, StreamId: 7, Grid: &pb.Dim3{X: 1, Y: 1, Z: 1},
			Block: &pb.Dim3{X: 1, Y: 1, Z: 1}, CallstackId: 100, Unfinished: 3},
		Streams: []*pb.HangLaunch{
			{Seq: 12, HostNs: 13*s + 250_000_000, KernelId: 3, StreamId: 13, CallstackId: 200, ForwardCallstackId: 100, Unfinished: 1},
			{Seq: 14, HostNs: 14 * s, KernelId: 9, Device: 1, StreamId: 21, CallstackId: 300, Unfinished: 2},
			{Seq: 15, HostNs: 14 * s, KernelId: 3, StreamId: 22, CallstackId: 400, Unfinished: 1},
			{Seq: 16, HostNs: 14 * s, KernelId: 3, StreamId: 23, Unfinished: 1},
		}}
	names := map[uint64]string{2: "spin(int volatile*)", 3: "tick(float*)"}
	where := map[uint64]string{100: "hang.py:30 main", 200: "", 400: ""}
	got := recording.HangReport(hang, func(id uint64) string { return names[id] }, func(id uint64) (string, bool) {
		text, ok := where[id]
		return text, ok
	})
	want := []string{
		"launch 11 (spin(int volatile*), grid 1x1x1, block 1x1x1, device 0, stream 7) has not finished on the GPU after 5s; launched at hang.py:30 main; 2 more unfinished launches wait behind it on its stream",
		"also unfinished: launch 12 (tick(float*), grid 0x0x0, block 0x0x0, device 0, stream 13), made 6.75s before; launched in the backward of hang.py:30 main",
		"also unfinished: launch 14 (kernel 9, grid 0x0x0, block 0x0x0, device 1, stream 21), made 6s before; callstack 300 not recorded; 1 more unfinished launch waits behind it on its stream",
		"also unfinished: launch 15 (tick(float*), grid 0x0x0, block 0x0x0, device 0, stream 22), made 6s before; callstack 400 holds no frame outside the CUDA libraries",
		"also unfinished: launch 16 (tick(float*), grid 0x0x0, block 0x0x0, device 0, stream 23), made 6s before; no callstack taken",
	}
	if !slices.Equal(got, want) {
		t.Errorf("HangReport:\n%q\nwant\n%q", got, want)
	}
	// Whatever a damaged record holds, a report comes out.
	if got := recording.HangReport(&pb.Hang{}, func(uint64) string { return "" }, func(uint64) (string, bool) { return "", false }); len(got) != 1 {
		t.Errorf("an empty hang: %q", got)
	}
}
