package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/agentpath"
	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/cupti/locate"
	"github.com/gpurr/gpurr/internal/demo"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/recording"
)

func newDoctorCmd() *cobra.Command {
	var cupti string
	cmd := &cobra.Command{
		Use:   "doctor [--cupti PATH]",
		Short: "Check that this machine can record: driver, GPU, CUPTI, agent, injection",
		Long: `doctor checks each piece gpurr record needs and prints one line per
check: ✓ when it is there, ✗ with how to fix it when not, and – when the
check could not run because an earlier one failed.

  NVIDIA driver  libcuda.so.1 loads; its CUDA version
  GPUs           the devices the driver sees
  CUPTI          found (every place looked is listed) and loadable
  agent          libgpurr.so: $GPURR_AGENT, else beside the gpurr executable
                 or in ../lib/gpurr from it (make install)
  NVTX           whether the program's NVTX ranges will be recorded (a note,
                 marked !, when they will not: recording still works)
  Triton cache   whether Triton's cache holds kernels' PTX (what race, probe
                 and record --probe instrument, and hash mode's write sets
                 prove from); a note when it does not
  Inductor cache torch.compile's per-device Triton caches, where there are some
  injection      gpurr record of the demo workload records every launch

Exit status: 0 when every check passed, 1 when something is missing.`,
		Args: positional(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDoctor(cmd.OutOrStdout(), cupti)
		},
	}
	cmd.Flags().StringVar(&cupti, "cupti", "", "path of libcupti.so (or its directory) to check instead of searching; also $"+locate.EnvCUPTI)
	return cmd
}

// report prints the doctor's lines and counts the failures.
type report struct {
	w        io.Writer
	failures int
}

const checkWidth = 14

func (r *report) ok(check, format string, args ...any) {
	fmt.Fprintf(r.w, "✓ %-*s %s\n", checkWidth, check, fmt.Sprintf(format, args...))
}

// fail prints a ✗ line for check, what went wrong, and the fix.
func (r *report) fail(check string, problem error, fix string) {
	r.failures++
	fmt.Fprintf(r.w, "✗ %-*s %v\n", checkWidth, check, problem)
	if fix != "" {
		r.detail("fix: " + fix)
	}
}

// note prints a ! line: something that works less well, not a failure.
func (r *report) note(check, format string, args ...any) {
	fmt.Fprintf(r.w, "! %-*s %s\n", checkWidth, check, fmt.Sprintf(format, args...))
}

func (r *report) skip(check, why string) {
	fmt.Fprintf(r.w, "– %-*s skipped: %s\n", checkWidth, check, why)
}

func (r *report) detail(line string) {
	fmt.Fprintf(r.w, "  %*s %s\n", checkWidth, "", line)
}

func runDoctor(stdout io.Writer, cuptiFlag string) error {
	r := &report{w: stdout}
	gpuOK := checkDriver(r)
	cuptiPath := checkCUPTI(r, cuptiFlag)
	agentPath := checkAgent(r)
	agentOK := agentPath != ""
	if agentOK {
		checkNVTX(r, agentPath, os.Getenv(agentcfg.NVTXInjection))
	}
	checkTritonCache(r, agentcfg.TritonCacheDir())
	checkInductorCaches(r, agentcfg.InductorTritonCacheDirs())

	var missing []string
	for _, m := range []struct {
		ok   bool
		what string
	}{{gpuOK, "a GPU"}, {cuptiPath != "", "CUPTI"}, {agentOK, "the agent"}} {
		if !m.ok {
			missing = append(missing, m.what)
		}
	}
	if len(missing) > 0 {
		r.skip("injection", "needs "+joinAnd(missing))
	} else {
		checkInjection(r, cuptiPath)
	}

	if r.failures > 0 {
		fmt.Fprintf(stdout, "\n%s: fix the ✗ lines above, then run gpurr doctor again.\n", info.Count(r.failures, "problem"))
		return exitWith(exitFound)
	}
	fmt.Fprintln(stdout, "\nThis machine can record: try gpurr demo, or gpurr record -o DIR -- YOUR-PROGRAM.")
	return nil
}

// checkDriver checks libcuda.so.1 and the devices; it reports whether a
// GPU is usable.
func checkDriver(r *report) bool {
	sys, err := cuda.Probe()
	if errors.Is(err, cuda.ErrNoDriver) {
		r.fail("NVIDIA driver", err, "install the NVIDIA driver for your GPU (nvidia-smi should then list it); in a container, run it with the GPU and driver libraries mounted (docker run --gpus all)")
		r.skip("GPUs", "needs the NVIDIA driver")
		return false
	}
	if sys.DriverVersion == 0 {
		r.fail("NVIDIA driver", err, "reinstall the NVIDIA driver; nvidia-smi should work")
		r.skip("GPUs", "needs the NVIDIA driver")
		return false
	}
	r.ok("NVIDIA driver", "%s, CUDA %s", cuda.Library, cuda.FormatVersion(sys.DriverVersion))
	if err != nil {
		fix := "check that nvidia-smi lists the GPU and that CUDA_VISIBLE_DEVICES does not hide it"
		if errors.Is(err, cuda.ErrorSystemDriverMismatch) || errors.Is(err, cuda.ErrorStubLibrary) {
			fix = "the libcuda.so.1 found does not match the loaded kernel driver: reinstall the driver, or remove the stub or compatibility library from the library path"
		}
		r.fail("GPUs", err, fix)
		return false
	}
	for _, d := range sys.Devices {
		r.ok(fmt.Sprintf("GPU %d", d.Ordinal), "%s", describeDevice(d))
	}
	return true
}

// checkCUPTI searches for CUPTI, lists every place looked, and checks that
// the library found loads. It returns the library's path, or "".
func checkCUPTI(r *report, flag string) string {
	res := locate.Search(locate.Config{Flag: flag, All: true})
	if err := res.Err(); err != nil {
		fix := locate.CUPTIFix
		if res.Explicit {
			fix = "give --cupti or $" + locate.EnvCUPTI + " the path of libcupti.so.13 (or of its directory)"
		} else {
			err = errNotFound
		}
		r.fail("CUPTI", err, fix)
		listPlaces(r, res)
		return ""
	}
	if err := cuda.CheckLibrary(res.Path); err != nil {
		r.fail("CUPTI", fmt.Errorf("%s is found but does not load: %v", res.Path, err),
			"install the libraries it needs (ldd "+shellQuote(res.Path)+" lists them) or point --cupti at another CUPTI")
		listPlaces(r, res)
		return ""
	}
	r.ok("CUPTI", "%s", res.Path)
	listPlaces(r, res)
	return res.Path
}

var errNotFound = errors.New("not found in any of the places below")

// listPlaces prints every place a search looked at, in order.
func listPlaces(r *report, res locate.Result) {
	r.detail("looked in, in order:")
	used := false
	for _, p := range res.Looked {
		where := p.Path
		if where == "" {
			where = p.Source
		}
		line := "✓ " + where
		if p.Err != nil {
			line = fmt.Sprintf("✗ %s: %v", where, p.Err)
		}
		if p.Source != where && !strings.HasPrefix(where, p.Source+"/") {
			line += "  (" + p.Source + ")"
		}
		if p.Err == nil && p.Path == res.Path && !used {
			line += "  ← used"
			used = true
		}
		r.detail("  " + line)
	}
}

// checkAgent checks that libgpurr.so is where gpurr record looks for it.
// It is not loaded here: the agent carries a Go runtime of its own.
func checkAgent(r *report) string {
	res := agentpath.Search()
	if err := res.Err(); err != nil {
		if !res.Explicit {
			err = errNotFound
		}
		r.fail("agent", err, agentpath.Fix)
		listPlaces(r, res)
		return ""
	}
	r.ok("agent", "%s", res.Path)
	return res.Path
}

// checkNVTX says whether gpurr record will record the program's NVTX
// ranges: the agent must be an NVTX tool, and NVTX_INJECTION64_PATH (set
// in this environment, prev) must not name another tool, which record keeps.
func checkNVTX(r *report, agent, prev string) {
	if _, err := locate.CheckLibrary(agent, agentpath.NVTXEntryPoint); err != nil {
		r.note("NVTX", "ranges will not be recorded: %s has no %s (an agent from an older build; run make)", agent, agentpath.NVTXEntryPoint)
		return
	}
	if prev != "" && !agentcfg.SameLibrary(prev, agent) {
		r.note("NVTX", "ranges will not be recorded: %s=%s names another tool, which gpurr record keeps (unset it to record them)", agentcfg.NVTXInjection, prev)
		return
	}
	r.ok("NVTX", "ranges will be recorded (gpurr record makes the agent NVTX's tool)")
}

// checkTritonCache says whether Triton kernels will come with their PTX, which gpurr race,
// gpurr probe and record --probe instrument: the agent reads it from Triton's cache. Never a
// failure: the cache appears when Triton first compiles, and other programs do not need it.
func checkTritonCache(r *report, dir string) {
	if dir == "" {
		r.note("Triton cache", "no home directory and no TRITON_CACHE_DIR: Triton kernels will have no PTX for race and probes")
		return
	}
	ptxs, err := filepath.Glob(filepath.Join(dir, "*", "*.ptx"))
	switch {
	case err != nil:
		r.note("Triton cache", "%s: %v", dir, err)
	case len(ptxs) == 0:
		if _, err := os.Stat(dir); err != nil {
			r.note("Triton cache", "%s does not exist yet: it appears when Triton first compiles (race and probes read Triton kernels' PTX there)", dir)
			return
		}
		r.note("Triton cache", "%s holds no kernel's PTX yet (race and probes read Triton kernels' PTX there)", dir)
	default:
		r.ok("Triton cache", "%s: %s with PTX, which race and probes instrument", dir, info.Count(len(ptxs), "compiled kernel"))
	}
}

// checkInductorCaches reports torch.compile's per-device Triton caches, which the agent also
// reads (write sets, probes): nothing when there are none yet.
func checkInductorCaches(r *report, dirs []string) {
	if len(dirs) == 0 {
		return
	}
	n := 0
	for _, d := range dirs {
		ptxs, _ := filepath.Glob(filepath.Join(d, "*", "*.ptx"))
		n += len(ptxs)
	}
	r.ok("Inductor cache", "%s: %s with PTX from torch.compile, read as Triton's (hash mode's write sets, probes)",
		strings.Join(dirs, ", "), info.Count(n, "compiled kernel"))
}

// injectionTimeout bounds the recorded demo workload.
const injectionTimeout = 2 * time.Minute

// checkInjection records the demo workload and checks that the recording
// holds every launch. A failed recording is kept for inspection.
func checkInjection(r *report, cuptiPath string) {
	exe, err := os.Executable()
	if err != nil {
		r.fail("injection", fmt.Errorf("cannot find the gpurr executable: %v", err), "run gpurr by its path")
		return
	}
	tmp, release, err := tempDir("gpurr-doctor-")
	if err != nil {
		r.fail("injection", err, "set $TMPDIR to a writable directory")
		return
	}
	defer release() // an interrupt until then removes tmp; a failed recording is kept
	dir := filepath.Join(tmp, "rec")
	ctx, cancel := context.WithTimeout(context.Background(), injectionTimeout)
	defer cancel()
	var out bytes.Buffer
	err = recordWorkload(ctx, exe, dir, []string{"--cupti", cuptiPath}, "", &out, &out)
	n := 0
	if err == nil {
		n, err = countLaunches(dir)
	}
	if err == nil && n == demo.Launches {
		os.RemoveAll(tmp)
		r.ok("injection", "gpurr record saw all %d launches of the demo workload", n)
		return
	}
	if err == nil {
		err = fmt.Errorf("the recording holds %d of the demo workload's %d launches", n, demo.Launches)
	}
	r.fail("injection", err, "read the agent's log in "+dir+" (gpurr info "+shellQuote(dir)+" shows it)")
	for _, line := range lastLines(out.String(), 10) {
		r.detail("| " + line)
	}
}

// countLaunches counts the launches in a recording's processes.
func countLaunches(dir string) (int, error) {
	set, err := recording.Open(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range set.Processes {
		d, err := p.Load()
		if err != nil {
			return n, err
		}
		n += len(d.Launches)
	}
	return n, nil
}

// joinAnd joins ["a", "b", "c"] as "a, b and c".
func joinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
