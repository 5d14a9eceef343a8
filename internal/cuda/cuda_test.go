package cuda

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestErrorFormat(t *testing.T) {
	e := &Error{Call: "cuModuleLoadData", Code: ErrorNoBinaryForGPU, Name: "CUDA_ERROR_NO_BINARY_FOR_GPU",
		Description: "no kernel image is available for execution on the device"}
	want := "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available for execution on the device)"
	if e.Error() != want {
		t.Errorf("got  %q\nwant %q", e.Error(), want)
	}
	e.Description = ""
	if got := e.Error(); got != "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU" {
		t.Errorf("without description: %q", got)
	}
	if !errors.Is(e, ErrorNoBinaryForGPU) || errors.Is(e, ErrorNoDevice) {
		t.Error("errors.Is does not match the Result")
	}
	// ptxas's log as the JIT returns it: several lines, padded columns, a trailing newline.
	e.Detail = oneLine("ptxas application ptx input, line 5; error   : Duplicate .version directive\n\nptxas fatal   : Ptx assembly aborted due to errors\n")
	want = "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU: ptxas application ptx input, line 5; error : Duplicate .version directive | ptxas fatal : Ptx assembly aborted due to errors"
	if got := e.Error(); got != want {
		t.Errorf("with the JIT log:\n got  %q\nwant %q", got, want)
	}
}

func TestCheckNames(t *testing.T) {
	if check("cuInit", 0) != nil {
		t.Fatal("CUDA_SUCCESS is an error")
	}
	err := check("cuInit", 100)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrorNoDevice || e.Call != "cuInit" {
		t.Fatalf("check = %#v", err)
	}
	// Named by the driver when it is loaded, else by the table.
	if !strings.HasPrefix(err.Error(), "cuInit: CUDA_ERROR_NO_DEVICE") {
		t.Errorf("check(100) = %q", err)
	}
	if Load() != nil && check("cuX", 12345).Error() != "cuX: CUresult(12345)" {
		t.Errorf("unknown result without a driver = %q", check("cuX", 12345))
	}
}

func TestOpenMissingLibrary(t *testing.T) {
	err := open("libgpurr-test-no-such-library.so.1")
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v, want ErrNoDriver", err)
	}
	want := "no CUDA driver: libgpurr-test-no-such-library.so.1 not found (is the NVIDIA driver installed?)"
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
	if got := openError("libcuda.so.1", "libcuda.so.1: wrong ELF class: ELFCLASS32").Error(); got != "no CUDA driver: cannot load libcuda.so.1: libcuda.so.1: wrong ELF class: ELFCLASS32" {
		t.Errorf("other dlopen failure: %q", got)
	}
}

func TestWithoutDriver(t *testing.T) {
	if Load() == nil {
		t.Skip("libcuda.so.1 loads here; this test covers machines without a driver")
	}
	err := Load()
	if !strings.HasPrefix(err.Error(), "no CUDA driver: libcuda.so.1") {
		t.Errorf("Load() = %q", err)
	}
	sys, err := Probe()
	if !errors.Is(err, ErrNoDriver) || sys.DriverVersion != 0 {
		t.Errorf("Probe() = %+v, %v", sys, err)
	}
	// Calls that need no Load first fail cleanly instead of crashing.
	var dst [4]float32
	if err := CopyDtoH(dst[:], 0x1000); !errors.Is(err, ErrorNotInitialized) {
		t.Errorf("CopyDtoH without a driver = %v", err)
	}
	if _, err := DeviceCount(); !errors.Is(err, ErrorNotInitialized) {
		t.Errorf("DeviceCount without a driver = %v", err)
	}
	if err := ResetContexts(); !errors.Is(err, ErrorNotInitialized) {
		t.Errorf("ResetContexts without a driver = %v", err)
	}
}

func TestLaunchRefusesUnsizedArguments(t *testing.T) {
	var s *Stream
	err := s.Launch(Function{name: "k"}, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, DevicePtr(0), 3)
	if err == nil || !strings.Contains(err.Error(), "argument 1 has type int") {
		t.Errorf("Launch with an int = %v", err)
	}
}

func TestFormats(t *testing.T) {
	if got := FormatVersion(13000); got != "13.0" {
		t.Errorf("FormatVersion(13000) = %q", got)
	}
	if got := FormatVersion(12080); got != "12.8" {
		t.Errorf("FormatVersion(12080) = %q", got)
	}
	u := [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if got := FormatUUID(u); got != "GPU-deadbeef-0102-0304-0506-0708090a0b0c" {
		t.Errorf("FormatUUID = %q", got)
	}
	if got := (Properties{CCMajor: 9, CCMinor: 0}).Arch(); got != "sm_90" {
		t.Errorf("Arch = %q", got)
	}
}

// TestDevice exercises the binding on device 0: memory round trip and
// events. The kernels are exercised by internal/demo.
func TestDevice(t *testing.T) {
	sys, err := Probe()
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Logf("driver %s, %+v", FormatVersion(sys.DriverVersion), sys.Devices)
	dev, err := DeviceGet(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	src := []uint32{1, 2, 3, 0xFFFFFFFF}
	p, err := ctx.MemAlloc(len(src) * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.MemFree(p)
	s, err := ctx.NewStream(StreamDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	start, err := ctx.NewEvent(EventDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer start.Destroy()
	end, _ := ctx.NewEvent(EventDefault)
	defer end.Destroy()
	if err := start.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := CopyHtoD(p, src); err != nil {
		t.Fatal(err)
	}
	if err := end.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if _, err := Elapsed(start, end); err != nil {
		t.Error(err)
	}
	dst := make([]uint32, len(src))
	if err := CopyDtoH(dst, p); err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if dst[i] != src[i] {
			t.Fatalf("round trip: %v, want %v", dst, src)
		}
	}
	if _, err := ctx.LoadModule([]byte("not a module")); err == nil {
		t.Error("LoadModule accepted garbage")
	} else {
		t.Logf("LoadModule(garbage) = %v", err)
	}
}

// Proc answers from the library Load opened (the agent binds its driver
// calls with it), and nothing before a Load that succeeded.
func TestProc(t *testing.T) {
	if Load() != nil {
		if p := Proc("cuInit"); p != 0 {
			t.Errorf("Proc(cuInit) = %#x with no library loaded", p)
		}
		return
	}
	if Proc("cuInit") == 0 || Proc("cuMemAlloc_v2") == 0 {
		t.Error("Proc finds no cuInit or cuMemAlloc_v2 in the loaded driver")
	}
	if p := Proc("gpurrNoSuchFunction"); p != 0 {
		t.Errorf("Proc(gpurrNoSuchFunction) = %#x", p)
	}
}

// A launch goes through cuLaunchKernel unless it needs attributes; a
// cooperative one passes cuLaunchKernelEx's cooperative attribute (the
// parameter buffer rules out cuLaunchCooperativeKernel), and a cluster
// its dimension, both when it is both.
func TestLaunchAttributes(t *testing.T) {
	shape := LaunchConfig{Grid: Dim3{X: 132, Y: 1, Z: 1}, Block: Dim3{X: 256, Y: 1, Z: 1}}
	coop, cluster, both := shape, shape, shape
	coop.Cooperative = true
	cluster.Cluster = Dim3{X: 2, Y: 1, Z: 1}
	both.Cooperative, both.Cluster = true, cluster.Cluster
	for _, c := range []struct {
		cfg   LaunchConfig
		call  string
		attrs []launchAttr
		names string
	}{
		{shape, "cuLaunchKernel", nil, ""},
		{coop, "cuLaunchKernelEx", []launchAttr{{attrCooperative, [3]uint32{1}}}, "cooperative"},
		{cluster, "cuLaunchKernelEx", []launchAttr{{attrCluster, [3]uint32{2, 1, 1}}}, "cluster 2x1x1"},
		{both, "cuLaunchKernelEx", []launchAttr{{attrCluster, [3]uint32{2, 1, 1}}, {attrCooperative, [3]uint32{1}}}, "cluster 2x1x1, cooperative"},
	} {
		if got := c.cfg.Call(); got != c.call {
			t.Errorf("%+v: call %s, want %s", c.cfg, got, c.call)
		}
		if got := c.cfg.attributes(); !slices.Equal(got, c.attrs) {
			t.Errorf("%+v: attributes %v, want %v", c.cfg, got, c.attrs)
		}
		if got := strings.Join(c.cfg.Attributes(), ", "); got != c.names {
			t.Errorf("%+v: named %q, want %q", c.cfg, got, c.names)
		}
	}
	if attrCooperative != 2 || attrCluster != 4 {
		t.Errorf("CUlaunchAttributeID cooperative %d, cluster %d; cuda.h has 2 and 4", attrCooperative, attrCluster)
	}
}
