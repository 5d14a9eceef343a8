package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/agentpath"
	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/cupti/locate"
	"github.com/gpurr/gpurr/internal/cupti/locate/locatetest"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func TestSummarizeRecording(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"../../testdata/recordings/torch-graphs", []string{"gpurr: recorded 16 launches in 1 process into "}},
		{"../../testdata/recordings/killed", []string{"gpurr: recorded 501 launches in 1 process into", "gpurr: record: vm-", " incomplete"}},
		{t.TempDir(), []string{"nothing recorded in", "no process initialized CUDA"}},
	} {
		var out bytes.Buffer
		summarizeRecording(&out, tc.dir)
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: summary %q lacks %q", filepath.Base(tc.dir), out.String(), w)
			}
		}
	}
}

// A snapshot selection that matched nothing is said at the end of record.
func TestSummarizeUnmatchedSelection(t *testing.T) {
	for _, c := range []struct {
		memory   *pb.MemoryConfig
		selected uint64
		want     string
	}{
		{&pb.MemoryConfig{Mode: "snapshot", SnapshotKernels: "nomatch", SnapshotLaunches: "5-9"}, 0, `--snapshot-kernels "nomatch" --snapshot-launches 5-9 matched no launch`},
		{&pb.MemoryConfig{Mode: "snapshot", SnapshotKernels: "gemm"}, 2, ""},
		{&pb.MemoryConfig{Mode: "snapshot"}, 0, ""}, // no selection: every launch, even if none ran
		{&pb.MemoryConfig{Mode: "hash"}, 0, ""},
	} {
		dir := filepath.Join(t.TempDir(), "rec")
		if err := recording.CreateSet(dir, []string{"prog"}); err != nil {
			t.Fatal(err)
		}
		w, err := recording.Create(dir, "host-1", &pb.Batch{Process: &pb.Process{Hostname: "host", Pid: 1, Memory: c.memory}})
		if err != nil {
			t.Fatal(err)
		}
		b := &pb.Batch{Stats: &pb.Stats{Launches: 3}, End: &pb.End{Reason: "exit"}}
		for i := range 3 {
			b.Launches = append(b.Launches, &pb.Launch{Seq: uint64(i + 1), Memory: &pb.MemoryPlan{SnapshotSelected: uint64(i) < c.selected}})
		}
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		summarizeRecording(&out, dir)
		got := out.String()
		if c.want == "" && strings.Contains(got, "matched no launch") || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%v selected %d: summary %q, want %q", c.memory, c.selected, got, c.want)
		}
	}
}

func TestGodebugEnv(t *testing.T) {
	for _, c := range []struct {
		prev string
		set  bool
		want string
	}{
		{"", false, "GODEBUG=asyncpreemptoff=1"},
		{"", true, "GODEBUG=asyncpreemptoff=1"},
		{"madvdontneed=1", true, "GODEBUG=madvdontneed=1,asyncpreemptoff=1"},
		{"asyncpreemptoff=0", true, "GODEBUG=asyncpreemptoff=0"},
	} {
		if got := godebugEnv(c.prev, c.set); got != c.want {
			t.Errorf("godebugEnv(%q, %v) = %q, want %q", c.prev, c.set, got, c.want)
		}
	}
}

func TestPytorchAllocatorEnv(t *testing.T) {
	for _, c := range []struct {
		name, mode string
		keep       bool
		conf       string
		confSet    bool
		add        string
		noteHas    string
	}{
		{name: "memory off", mode: "off"},
		{name: "hash, unset", mode: "hash", add: "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync", noteHas: "--keep-pytorch-allocator"},
		{name: "snapshot, unset", mode: "snapshot", add: "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync", noteHas: "each tensor is its own region"},
		{name: "digest, unset", mode: "digest", add: "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync", noteHas: "each tensor is its own region"},
		{name: "kept by flag", mode: "hash", keep: true},
		{name: "digest kept by flag", mode: "digest", keep: true},
		{name: "user's own setting", mode: "hash", conf: "expandable_segments:True", confSet: true, noteHas: "expandable_segments:True is kept"},
		{name: "set but empty", mode: "hash", conf: "", confSet: true, noteHas: "is kept"},
		{name: "user already chose async", mode: "hash", conf: "backend:cudaMallocAsync", confSet: true},
	} {
		add, note := pytorchAllocatorEnv(c.mode, c.keep, c.conf, c.confSet)
		if add != c.add {
			t.Errorf("%s: add = %q, want %q", c.name, add, c.add)
		}
		if (c.noteHas == "") != (note == "") || !strings.Contains(note, c.noteHas) {
			t.Errorf("%s: note = %q, want one containing %q", c.name, note, c.noteHas)
		}
	}
}

func TestNvtxEnv(t *testing.T) {
	const agent = "/opt/gpurr/bin/libgpurr.so"
	// The agent named through a link is the agent: NVTX loads the same library.
	dir := t.TempDir()
	real, link := dir+"/libgpurr.so", dir+"/link.so"
	if err := os.WriteFile(real, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if add, note := nvtxEnv(real, link); add != "NVTX_INJECTION64_PATH="+real || note != "" {
		t.Errorf("nvtxEnv(%q) through a link to the agent = %q, %q; want the agent and no note", link, add, note)
	}
	for _, c := range []struct{ prev, add, note string }{
		{"", "NVTX_INJECTION64_PATH=" + agent, ""},
		{agent, "NVTX_INJECTION64_PATH=" + agent, ""},
		{"/opt/nsight/libToolsInjection64.so", "", "NVTX ranges are not recorded"},
		{"/usr/local/cuda/lib64/libcupti.so.13", "", "NVTX ranges are not recorded"},
	} {
		add, note := nvtxEnv(agent, c.prev)
		if add != c.add || !strings.Contains(note, c.note) || (c.note == "") != (note == "") {
			t.Errorf("nvtxEnv(%q) = %q, %q; want %q and a note with %q", c.prev, add, note, c.add, c.note)
		}
	}
}

// Flags that only mean something together with others are refused before the program runs.
func TestRecordRefusesLoneMemoryFlags(t *testing.T) {
	expectUsageErrors(t, []usageCase{
		{[]string{"record", "--write-sets", "learned", "--", "true"}, "--write-sets needs --memory hash"},
		{[]string{"record", "--defer-hashes", "--", "true"}, "--defer-hashes needs --memory hash"},
		{[]string{"record", "--memory", "hash", "--write-sets", "all", "--defer-hashes", "--", "true"}, "--defer-hashes needs --memory hash with write sets"},
		{[]string{"record", "--memory", "hash", "--defer-hashes=sideways", "--", "true"}, "--defer-hashes=sideways: want beside, stream or off"},
		{[]string{"record", "--defer-hashes=stream", "--", "true"}, "--defer-hashes needs --memory hash"},
	})
}

// --defer-hashes takes where batches run; bare, or true as the bool flag it was, is beside.
func TestRecordDeferHashesModes(t *testing.T) {
	cmd := newRecordCmd()
	if err := cmd.ParseFlags([]string{"--defer-hashes"}); err != nil {
		t.Fatal(err)
	}
	if v := cmd.Flags().Lookup("defer-hashes").Value.String(); v != "beside" {
		t.Errorf("a bare --defer-hashes is %q, want beside", v)
	}
	for v, want := range map[string]string{"beside": "beside", "true": "beside", "stream": "stream", "off": "", "false": ""} {
		if got, err := deferMode(v); got != want || err != nil {
			t.Errorf("deferMode(%q) = %q, %v; want %q", v, got, err, want)
		}
	}
}

// TestRecordWithoutDriver: on a machine with neither the NVIDIA driver nor CUPTI (the README's
// first try without a GPU), record says in one line that the driver is missing, not only CUPTI,
// and where to go next; it runs nothing and creates no recording.
func TestRecordWithoutDriver(t *testing.T) {
	if err := cuda.Load(); err == nil {
		t.Skip("the NVIDIA driver loads here; this test covers machines without one")
	}
	dir := t.TempDir()
	agent := filepath.Join(dir, "libgpurr.so")
	locatetest.Write(t, agent, locatetest.Library{Soname: "libgpurr.so", Exports: []string{agentpath.EntryPoint, agentpath.NVTXEntryPoint}})
	t.Setenv(agentpath.EnvVar, agent)
	t.Setenv(locate.EnvCUPTI, "")
	t.Setenv("CUDA_HOME", "")
	t.Setenv("PATH", dir) // no python3 to ask for site-packages
	saved := locate.StandardDirs
	locate.StandardDirs = []string{filepath.Join(dir, "cuda", "lib64")}
	t.Cleanup(func() { locate.StandardDirs = saved })

	out, ran := filepath.Join(dir, "out"), filepath.Join(dir, "ran")
	var stdout, stderr bytes.Buffer
	code := run([]string{"record", "-o", out, "--", "/bin/touch", ran}, &stdout, &stderr)
	msg := stderr.String()
	if code != exitFailure || strings.Count(msg, "\n") != 1 {
		t.Errorf("exit %d, want %d with one line; stderr %q", code, exitFailure, msg)
	}
	for _, want := range []string{"gpurr: record: no CUDA driver: ", "CUPTI is missing too", "gpurr doctor", "gpurr demo"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q lacks %q", msg, want)
		}
	}
	for _, p := range []string{out, ran} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists: record went ahead", p)
		}
	}
}

// TestRecordConfigIsDecodes: record's flags left out are the agent's variables left out. The
// configuration record makes of its flags is what the agent decodes from the variables of the
// flags given only: the two sides apply the same defaults.
func TestRecordConfigIsDecodes(t *testing.T) {
	for _, c := range []struct {
		flags []string
		env   []string
	}{
		{nil, nil},
		// Step digests go without kernel timing unless it is asked for.
		{[]string{"--memory", "digest"}, []string{agentcfg.Memory + "=digest", agentcfg.GPUTiming + "=off"}},
		{[]string{"--memory", "digest", "--gpu-timing=steps"}, []string{agentcfg.Memory + "=digest"}},
		{[]string{"--memory", "digest", "--nan-scan", ""}, []string{agentcfg.Memory + "=digest", agentcfg.NanScan + "=", agentcfg.GPUTiming + "=off"}},
		{[]string{"--memory", "snapshot", "--snapshot-kernels", "gemm"}, []string{agentcfg.Memory + "=snapshot", agentcfg.SnapshotKernels + "=gemm"}},
		{[]string{"--memory", "hash", "--defer-hashes"}, []string{agentcfg.Memory + "=hash", agentcfg.DeferHashes + "=beside"}},
		{[]string{"--gpu-timing=sample"}, []string{agentcfg.GPUTiming + "=sample"}},
		{[]string{"--gpu-timing=false", "--callstack", "python"}, []string{agentcfg.GPUTiming + "=off", agentcfg.Callstack + "=python"}},
		{[]string{"--gpu-timing=all"}, []string{agentcfg.GPUTiming + "=on"}},
		{[]string{"--gpu-timing-steps", "2/5"}, []string{agentcfg.GPUTimingSteps + "=2/5"}},
		// The hang watch times every kernel unless --gpu-timing says otherwise.
		{[]string{"--hang-timeout", "1m"}, []string{agentcfg.HangTimeout + "=1m", agentcfg.GPUTiming + "=on"}},
	} {
		var o recordOptions
		cmd := &cobra.Command{}
		o.define(cmd)
		if err := cmd.ParseFlags(c.flags); err != nil {
			t.Fatal(err)
		}
		got, err := o.config(cmd.Flags())
		if err != nil {
			t.Fatalf("%v: %v", c.flags, err)
		}
		got.CUPTI = "/c/libcupti.so"
		env := map[string]string{agentcfg.CUPTI: got.CUPTI}
		for _, kv := range c.env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		want, err := agentcfg.Decode(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("record %v makes\n%+v\nthe agent decodes %v as\n%+v, %v", c.flags, got, c.env, want, err)
		}
	}
}

func TestXLAEnv(t *testing.T) {
	const dir = "/r/xla"
	for _, c := range []struct {
		prev     string
		set      bool
		add      string
		noteHas  string
		scenario string
	}{
		{scenario: "unset", add: "XLA_FLAGS=--xla_dump_to=/r/xla --xla_dump_hlo_as_text"},
		{scenario: "empty", set: true, add: "XLA_FLAGS=--xla_dump_to=/r/xla --xla_dump_hlo_as_text"},
		{scenario: "user's flags kept", prev: "--xla_gpu_deterministic_ops=true", set: true,
			add: "XLA_FLAGS=--xla_gpu_deterministic_ops=true --xla_dump_to=/r/xla --xla_dump_hlo_as_text"},
		{scenario: "user's dump wins", prev: "--xla_dump_to=/tmp/mine", set: true, noteHas: "--xla_dump_to, which is kept"},
	} {
		add, note := xlaEnv(c.prev, c.set, dir)
		if add != c.add || (c.noteHas == "") != (note == "") || !strings.Contains(note, c.noteHas) {
			t.Errorf("%s: %q, %q; want %q and a note with %q", c.scenario, add, note, c.add, c.noteHas)
		}
	}
}

// The dump keeps the optimized modules and thunk sequences only; a folder
// left with nothing is removed, and one whose modules readers cannot read
// is warned of once.
func TestPruneXLADump(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "xla")
	src := filepath.Join("..", "..", "recording", "internal", "xla", "testdata", "dump")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "module_6630.jit_step"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if note := pruneXLADump(dir); note != "" {
		t.Fatalf("note %q", note)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 6 {
		t.Fatalf("%d files left, want the 3 modules and their 3 thunk sequences", len(left))
	}
	for _, e := range left {
		if strings.Contains(e.Name(), "buffer-assignment") || e.IsDir() {
			t.Errorf("%s kept", e.Name())
		}
	}

	empty := filepath.Join(t.TempDir(), "xla")
	os.MkdirAll(filepath.Join(empty, "module_0001.jit_f"), 0o755)
	os.WriteFile(filepath.Join(empty, "module_0001.jit_f.before_optimizations.txt"), []byte("HloModule f\n"), 0o644)
	if note := pruneXLADump(empty); note != "" {
		t.Fatalf("note %q", note)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("empty dump folder kept: %v", err)
	}

	bad := filepath.Join(t.TempDir(), "xla")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "module_0001.jit_f.sm_9.0a_gpu_after_optimizations.txt"), []byte("HloProto {}\n"), 0o644)
	if note := pruneXLADump(bad); !strings.Contains(note, "no HloModule header: XLA's kernels are shown without their lines") {
		t.Fatalf("unreadable dump: note %q", note)
	}
}
