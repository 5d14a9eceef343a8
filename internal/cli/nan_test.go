package cli

import (
	"math"
	"strings"
	"testing"
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
		"region 0 (192.0 KiB, parameter offset 0): as f32 1 NaN, 1 Inf (first at byte 0x190)")
	ls[2].before = ls[2].after // the NaN was there before the kernel ran: it came from a copy
	code, out, errs = runCLI("nan", writeRun(t, "snapshot", ls), "--dtype", "f32")
	expectOutput(t, "NaN from a copy", code, 1, out, errs, "NaN or Inf first after launch 3", "already there before this launch")
	code, out, _ = runCLI("nan", writeRun(t, "snapshot", trainRun(1.5, false)))
	if code != 0 || !strings.Contains(out, "no NaN or Inf (as f32,bf16,f16) after any of the 4 launches") {
		t.Errorf("clean run: exit %d:\n%s", code, out)
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"nan", writeRun(t, "hash", trainRun(1, false))}, "recorded without snapshots: record with --memory snapshot"},
		{[]string{"nan", nan, "--dtype", "i32"}, "i32 has no NaN or Inf"},
		{[]string{"nan", nan, "--dtype", "f32,q"}, "unknown dtype \"q\""},
	})
}

func TestCountFlagsAndAllocatorFlag(t *testing.T) {
	rec := writeRun(t, "hash", trainRun(1, false))
	expectUsageErrors(t, []usageCase{
		{[]string{"diff", "--unmatched", "-1", rec, rec}, "take a count of 0 or more"},
		{[]string{"nan", "--frames", "-2", rec}, "takes a count of 0 or more"},
		{[]string{"record", "--keep-pytorch-allocator", "--", "true"}, "--keep-pytorch-allocator only matters with --memory"},
	})
}
