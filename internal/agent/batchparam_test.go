package agent

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpurr/gpurr/internal/kernels"
)

// batchParamC fills the agent's gp_batch_param field by field, by name, as memjobs.c does, and
// writes its bytes.
const batchParamC = `#include <stdio.h>
#include <string.h>
#include "memcap.h"
int main(void) {
  gp_batch_param p;
  memset(&p, 0, sizeof p);
  p.njobs = 2, p.nregions = 3;
  p.j[0] = (gp_batch_job){.seq = 11, .out = 12, .staging = 13, .scratch = 14, .counters = 15, .nan_counts = 16,
                          .nregions = 2, .total_chunks = 5, .snapshot = 1, .nan_dtypes = 17,
                          .first_region = 0, .first_block = 0};
  p.j[1] = (gp_batch_job){.seq = 21, .out = 22, .staging = 0, .scratch = 24, .counters = 25, .nan_counts = 0,
                          .nregions = 1, .total_chunks = 1, .snapshot = 0, .nan_dtypes = 0,
                          .first_region = 2, .first_block = 5};
  p.r[0] = (gp_job_region){.base = 101, .size = 3 * 65536, .shadow = 103, .first_chunk = 0, .flags = 1};
  p.r[1] = (gp_job_region){.base = 201, .size = 2 * 65536, .shadow = 0, .first_chunk = 3, .flags = 0};
  p.r[2] = (gp_job_region){.base = 301, .size = 100, .shadow = 303, .first_chunk = 0, .flags = 0};
  return fwrite(&p, sizeof p, 1, stdout) != 1;
}
`

// TestBatchParamMatchesKernels checks the agent's hand-written mirror of the hash kernel's
// parameter (memcap.h's gp_batch_param) against kernels.EncodeBatch, which the GPU tests run the
// kernel with: the same jobs, given field by field, must give the same bytes wherever the kernel
// reads (the jobs and regions in use). A size check alone would miss two fields swapped.
func TestBatchParamMatchesKernels(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the check compiles memcap.h")
	}
	touchSources(t, ".")
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "param.c"), filepath.Join(dir, "param")
	if err := os.WriteFile(src, []byte(batchParamC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-std=gnu11", "-Wall", "-Werror", "-I.", src, "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	got, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	first := kernels.Job{Seq: 11, Out: 12, Staging: 13, Scratch: 14, Counters: 15, NanCounts: 16, TotalChunks: 5,
		Snapshot: true, NanDtypes: 17, Regions: []kernels.JobRegion{
			{Base: 101, Size: 3 * 65536, Shadow: 103, FirstChunk: 0, Flags: 1},
			{Base: 201, Size: 2 * 65536, FirstChunk: 3},
		}}
	second := kernels.Job{Seq: 21, Out: 22, Scratch: 24, Counters: 25, TotalChunks: 1,
		Regions: []kernels.JobRegion{{Base: 301, Size: 100, Shadow: 303}}}
	want, err := kernels.EncodeBatch(first, second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(want) != kernels.BatchBytes {
		t.Fatalf("gp_batch_param is %d bytes, EncodeBatch gives %d, the kernel takes %d", len(got), len(want), kernels.BatchBytes)
	}
	// The kernel reads the header, jobs[0, njobs) and regions[0, nregions); the rest is unused.
	const header, region = 8, 32
	regions := kernels.BatchBytes - kernels.MaxJobRegions*region
	job := (regions - header) / kernels.MaxBatchJobs
	for _, span := range [][2]int{{0, header + 2*job}, {regions, regions + 3*region}} {
		if g, w := got[span[0]:span[1]], want[span[0]:span[1]]; !bytes.Equal(g, w) {
			t.Errorf("bytes [%d, %d): memcap.h gives\n%x\nEncodeBatch gives\n%x", span[0], span[1], g, w)
		}
	}
}
