package cli

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

func TestNan(t *testing.T) {
	ls := trainRun(1.5, false)
	ls[2].after = append([]byte(nil), ls[2].after...)
	copy(ls[2].after[100*4:], floats(float32(math.NaN()), float32(math.Inf(-1))))
	nan := writeRun(t, "snapshot", ls)
	code, out, errs := runCLI("nan", nan, "--dtype", "f32")
	expectOutput(t, "planted NaN", code, 1, out, errs,
		"NaN or Inf first after launch 3 (the 2 launches with snapshots before it hold none)",
		"kernel   scatter_add_kernel",
		"at       train.py:30 step",
		"region 0 (192.0 KiB, parameter offset 0): as f32 1 NaN, 1 Inf (first at byte 0x190, element 100)")
	// A type named twice is looked for once: its counts were printed twice.
	code, out, errs = runCLI("nan", nan, "--dtype", "f32, f32")
	if code != 1 || strings.Count(out, "as f32") != 1 {
		t.Errorf("--dtype f32,f32: exit %d, want 1 and one count as f32:\n%s%s", code, out, errs)
	}
	ls[2].before = ls[2].after // the NaN was there before the kernel ran: it came from a copy
	code, out, errs = runCLI("nan", writeRun(t, "snapshot", ls), "--dtype", "f32")
	expectOutput(t, "NaN from a copy", code, 1, out, errs, "NaN or Inf first after launch 3", "already there before this launch")
	clean := writeRun(t, "snapshot", trainRun(1.5, false))
	code, out, _ = runCLI("nan", clean)
	if code != 0 || !strings.Contains(out, "no NaN or Inf (as f32,bf16,f16) after any of the 4 launches") {
		t.Errorf("clean run: exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI("nan", clean, "--dtype", "bf16, f32,bf16")
	if code != 0 || !strings.Contains(out, "no NaN or Inf (as bf16,f32) after any of the 4 launches") {
		t.Errorf("clean run, --dtype 'bf16, f32,bf16': exit %d:\n%s", code, out)
	}
	// A training loop: the report names the step the NaN appeared in.
	stepped := append([]fakeLaunch{{kernel: 1, line: 20, after: floats(7), optim: true}}, ls...)
	code, out, errs = runCLI("nan", writeRun(t, "snapshot", stepped), "--dtype", "f32")
	expectOutput(t, "NaN in step 1", code, 1, out, errs, "NaN or Inf first after launch 4", "  step     1 of 1 (optimizer steps ended before it)")
	code, out, _ = runCLI("nan", nan, "--dtype", "f32")
	if code != 1 || strings.Contains(out, "step     ") || strings.Contains(out, "range    ") {
		t.Errorf("a run without optimizer steps or ranges names a step or a range: exit %d\n%s", code, out)
	}
	// Steps numbered by NVTX ranges: the NaN came in the second "iter", in its "loss" range.
	for i, r := range [][]string{{"iter", "forward"}, {"iter", "loss"}} {
		ls[i].ranges = r
	}
	ls = append(ls[:2:2], append([]fakeLaunch{{kernel: 1, line: 13, after: floats(0), ranges: []string{"eval"}}}, ls[2:]...)...)
	ls[3].ranges = []string{"iter", "loss"}
	iters := writeRun(t, "snapshot", ls)
	code, out, errs = runCLI("nan", iters, "--dtype", "f32", "--step-range", "^iter$")
	expectOutput(t, "NaN in a step range", code, 1, out, errs, "NaN or Inf first after launch 4",
		"\n  step     1 of 2 (ranges matching \"^iter$\" ended before it)\n  range    iter / loss\n")
	code, out, errs = runCLI("nan", iters, "--dtype", "f32")
	expectOutput(t, "NaN in a range", code, 1, out, errs, "\n  kernel   scatter_add_kernel\n  range    iter / loss\n")
	code, _, errs = runCLI("nan", iters, "--dtype", "f32", "--step-range", "nothing")
	if code != 1 || !strings.Contains(errs, `no NVTX range matches the step range "nothing": every launch is step 0`) {
		t.Errorf("a step range that matches nothing: exit %d, stderr %q", code, errs)
	}

	expectUsageErrors(t, []usageCase{
		{[]string{"nan", nan, "--step-range", "("}, "gpurr: nan: --step-range: missing closing ): `(`"},
		{[]string{"nan", writeRun(t, "hash", trainRun(1, false))}, "recorded without snapshots or NaN counts: record with --memory hash --nan-scan f32,bf16,f16 (or --memory snapshot)"},
		{[]string{"nan", nan, "--dtype", "i32"}, "i32 has no NaN or Inf"},
		{[]string{"nan", nan, "--dtype", "f32,q"}, "unknown dtype \"q\""},
		// Only the types nan takes are offered.
		{[]string{"nan", nan, "--dtype", ""}, "an empty type: want floating-point types, comma-separated: f32, f64, f16, bf16"},
	})
}

// Finite f32 data read as f16 shows NaN bit patterns in its low halves; under the default
// --dtype f32,bf16,f16 nan must not report them, and a real f32 NaN is reported as f32 only.
func TestNanJudgesTheType(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	vs := make([]float32, 4096)
	for i := range vs {
		vs[i] = float32(r.NormFloat64())
	}
	ls := []fakeLaunch{{kernel: 1, line: 10, after: floats(vs...)}}
	code, out, errs := runCLI("nan", writeRun(t, "snapshot", ls))
	if code != 0 || !strings.Contains(out, "no NaN or Inf") {
		t.Errorf("finite f32 data: exit %d:\n%s%s", code, out, errs)
	}
	vs[7] = float32(math.NaN())
	ls = []fakeLaunch{{kernel: 1, line: 10, after: floats(vs...)}}
	code, out, errs = runCLI("nan", writeRun(t, "snapshot", ls))
	expectOutput(t, "f32 NaN", code, 1, out, errs, "region 0 (16.0 KiB, parameter offset 0): as f32 1 NaN, 0 Inf (first at byte 0x1c, element 7)\n")
	// Named types count every NaN pattern, as asked.
	code, out, _ = runCLI("nan", writeRun(t, "snapshot", ls), "--dtype", "f16")
	if code != 1 || !strings.Contains(out, "as f16 ") {
		t.Errorf("--dtype f16: exit %d:\n%s", code, out)
	}
}

// TestNanFromGPUCounts: a hash-mode recording with the GPU's NaN counts
// (--nan-scan f32,bf16) needs no snapshots; nan reports the counts by
// type, and refuses a type that was not counted.
func TestNanFromGPUCounts(t *testing.T) {
	ls := trainRun(1.5, false)
	ls[2].after = append([]byte(nil), ls[2].after...)
	copy(ls[2].after[100*4:], floats(float32(math.NaN()), float32(math.Inf(-1)), float32(math.NaN())))
	ls[3].after = floats(float32(math.NaN())) // later launches hold NaN too: the first one counts
	rec := writeRun(t, "hash+nan-scan", ls)
	code, out, errs := runCLI("nan", rec)
	expectOutput(t, "GPU counts", code, 1, out, errs,
		"NaN or Inf first after launch 3 (the 2 launches counted on the GPU before it hold none)",
		"kernel   scatter_add_kernel",
		"at       train.py:30 step",
		"region 0 (192.0 KiB, parameter offset 0): as f32 2 NaN, 1 Inf; as bf16 ",
		"counted on the GPU while recording",
		"--memory snapshot --snapshot-launches 3")
	if strings.Contains(out, "first at byte") {
		t.Errorf("GPU counts have no offsets, yet nan printed one:\n%s", out)
	}
	code, out, errs = runCLI("nan", writeRun(t, "hash+nan-scan", trainRun(1.5, false)), "--dtype", "bf16")
	if code != 0 || !strings.Contains(out, "no NaN or Inf (as bf16) after any of the 4 launches counted on the GPU") {
		t.Errorf("clean run: exit %d:\n%s%s", code, out, errs)
	}
	// With snapshots too, the launch found from the counts is decoded:
	// offsets, and whether the NaN was there before.
	code, out, errs = runCLI("nan", writeRun(t, "snapshot+nan-scan", ls), "--dtype", "f32")
	expectOutput(t, "GPU counts and snapshots", code, 1, out, errs,
		"NaN or Inf first after launch 3 (the 2 launches counted on the GPU before it hold none)",
		"as f32 2 NaN, 1 Inf (first at byte 0x190, element 100)")
	if code, out, errs := runCLI("info", rec); code != 0 || !strings.Contains(out, "NaN and Inf counted as f32, bf16") {
		t.Errorf("gpurr info does not say what nan-scan counted: exit %d:\n%s%s", code, out, errs)
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"nan", rec, "--dtype", "f16"}, "the GPU counted NaN as f32,bf16 only and there are no snapshots to decode: ask for --dtype f32,bf16, or record with --nan-scan f16"},
	})
}

func TestCountFlagsAndAllocatorFlag(t *testing.T) {
	rec := writeRun(t, "hash", trainRun(1, false))
	expectUsageErrors(t, []usageCase{
		{[]string{"diff", "--unmatched", "-1", rec, rec}, "take a count of 0 or more"},
		{[]string{"nan", "--frames", "-2", rec}, "takes a count of 0 or more"},
		{[]string{"record", "--keep-pytorch-allocator", "--", "true"}, "--keep-pytorch-allocator only matters with --memory"},
		{[]string{"record", "--nan-scan", "f32", "--", "true"}, "record: --nan-scan needs memory mode hash, snapshot or digest"},
		{[]string{"record", "--memory", "hash", "--nan-scan", "f32,i8", "--", "true"}, `record: --nan-scan f32,i8: "i8" is not a type the GPU counts NaN as (want f32, f64, f16, bf16)`},
	})
}

// A recording that lost memory states, or ended short, may hide the first NaN: nan says so,
// a line each, as query and trace do; before, its answer looked whole.
func TestNanWarnsWhatIsMissing(t *testing.T) {
	rec := variantRec(t, testrec.Memory) // rank 0 lost a memory state
	lost := "gpurr: nan: warning: gpu-box-4242: lost or failed while recording, so missing here: errors 1, memory_states_lost 1 (gpurr info says more)\n"
	code, _, errs := runCLI("nan", rec, "--process", "0")
	if code != exitFound || errs != lost {
		t.Errorf("lossy: exit %d, stderr %q; want exit 1 and %q", code, errs, lost)
	}
	events := filepath.Join(rec, testrec.Name(0), recording.EventsFile)
	st, err := os.Stat(events)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(events, st.Size()-10); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI("nan", rec, "--process", "0")
	short := "gpurr: nan: warning: gpu-box-4242: recording truncated (the program was killed mid-write); what was written before is read\n"
	if code != exitFound || !strings.HasPrefix(errs, short) {
		t.Errorf("truncated: exit %d, stderr %q; want exit 1 and %q first", code, errs, short)
	}
	if code, _, errs = runCLI("nan", writeRun(t, "snapshot", trainRun(1.5, false))); code != 0 || errs != "" {
		t.Errorf("a whole recording: exit %d, stderr %q; want no warning", code, errs)
	}
}

// A NaN in the first launch, or the second, is said with no count that reads "the 0 launches"
// or "the 1 launches".
func TestNanCountsFewLaunches(t *testing.T) {
	for _, c := range []struct {
		at   int
		want string
	}{
		{0, "NaN or Inf first after launch 1 (no launch with snapshots came before it)"},
		{1, "NaN or Inf first after launch 2 (the one launch with snapshots before it holds none)"},
		{2, "NaN or Inf first after launch 3 (the 2 launches with snapshots before it hold none)"},
	} {
		ls := trainRun(1.5, false)
		ls[c.at].after = floats(float32(math.NaN()))
		code, out, errs := runCLI("nan", writeRun(t, "snapshot", ls), "--dtype", "f32")
		expectOutput(t, c.want, code, 1, out, errs, c.want)
	}
	code, out, errs := runCLI("nan", writeRun(t, "snapshot", trainRun(1.5, false)[:1]), "--dtype", "f32")
	expectOutput(t, "one clean launch", code, 0, out, errs, "no NaN or Inf (as f32) after the one launch with snapshots (1 distinct chunk read)\n")
}
