package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/recording"
)

// What the verbs that run a recorded launch again (replay, extract, race, probe, tune)
// share: opening the process and the launch they name, finding the kernel's PTX, and
// reading the flags that say how to compare the result and which shape to run.

// openReplaySource opens the process of the recording at path that --process names (or the
// only one) for running its launches again; every failure is an input error of the verb.
func openReplaySource(cmd *cobra.Command, path, process string) (*replay.Source, error) {
	verb := cmd.Name()
	set, err := openRecording(cmd, path)
	if err != nil {
		return nil, err
	}
	proc, err := pickProcess(verb, set, process)
	if err != nil {
		return nil, err
	}
	src, err := replay.Open(proc)
	if err != nil {
		return nil, usageErrorf("%s: %v", verb, err)
	}
	return src, nil
}

// openCase opens the recording and the one launch --launch names (or the only snapshotted
// one): the start of every verb that runs a single recorded launch again. Close the source.
func openCase(cmd *cobra.Command, path, process string, launch uint64) (*replay.Source, *replay.Case, error) {
	src, err := openReplaySource(cmd, path, process)
	if err != nil {
		return nil, nil, err
	}
	seqs, err := pickLaunches(cmd.Name(), src, launch, false, 0)
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	c, err := src.Case(seqs[0])
	if err != nil {
		src.Close()
		return nil, nil, usageErrorf("%s: %v", cmd.Name(), err)
	}
	return src, c, nil
}

// pickLaunches resolves --launch / --all / --from to launch numbers.
func pickLaunches(verb string, src *replay.Source, launch uint64, all bool, from uint64) ([]uint64, error) {
	if launch != 0 {
		return []uint64{launch}, nil
	}
	ok := src.Replayable()
	if all {
		var seqs []uint64
		for _, s := range ok {
			if s >= from {
				seqs = append(seqs, s)
			}
		}
		switch {
		case len(ok) == 0:
			return nil, usageErrorf("%s: %s has no launch with snapshots before and after it%s", verb, src.Proc.Name, modeHint(src))
		case len(seqs) == 0:
			return nil, usageErrorf("%s: --from %d: %s has no snapshotted launch from there on (the last is %d)", verb, from, src.Proc.Name, ok[len(ok)-1])
		}
		return seqs, nil
	}
	switch len(ok) {
	case 1:
		return ok, nil
	case 0:
		return nil, usageErrorf("%s: %s has no launch with snapshots before and after it%s", verb, src.Proc.Name, modeHint(src))
	}
	return nil, usageErrorf("%s: %s has %d snapshotted launches (%s): say --launch SEQ", verb, src.Proc.Name, len(ok), info.SeqList(ok, 8))
}

func modeHint(src *replay.Source) string {
	if src.Data.Process.GetMemory().GetMode() != recording.MemorySnapshot {
		return " (record with --memory snapshot)"
	}
	return " (check --snapshot-kernels/--snapshot-launches)"
}

// kernelPTX finds the PTX of the launch's module for verb: --ptx, else the PTX the recording
// holds of it (replay.Source.RecordedPTX; of a fat binary's entries, the newest for the
// recorded GPU's architecture), and says where it came from.
func kernelPTX(verb string, src *replay.Source, c *replay.Case, file string) ([]byte, string, error) {
	if file != "" {
		b, err := ptxInput.read(verb, file)
		if err != nil {
			return nil, "", err
		}
		return b, file, nil
	}
	p, err := src.RecordedPTX(c)
	if err != nil {
		return nil, "", usageErrorf("%s: %w", verb, err)
	}
	gpu := 0
	if d := c.Device; d != nil {
		gpu = int(10*d.CcMajor + d.CcMinor)
	}
	e, err := p.For(c.Kernel.GetName(), gpu)
	if err != nil {
		return nil, "", usageErrorf("%s: %s: %v", verb, c.Name, err)
	}
	return e.Text, p.Origin(e), nil
}

// replayCheck builds the comparison the --dtype, --atol, --rtol and
// --elements flags ask for.
func replayCheck(verb, name string, atol, rtol float64, elements int) (replay.Check, error) {
	c := replay.Check{Atol: atol, Rtol: rtol, Elements: elements}
	if elements < 0 || !(atol >= 0) || !(rtol >= 0) { // NaN too: no difference is within it
		return c, usageErrorf("%s: --elements, --atol and --rtol take 0 or more", verb)
	}
	if name == "" {
		if atol != 0 || rtol != 0 {
			return c, usageErrorf("%s: --atol and --rtol need --dtype (the element type to compare)", verb)
		}
		return c, nil
	}
	t, err := dtype.Parse(name)
	if err != nil {
		return c, usageErrorf("%s: --dtype: %v", verb, err)
	}
	c.Type = t
	return c, nil
}

// parseDim3 reads "X", "X<sep>Y" or "X<sep>Y<sep>Z"; missing sizes are 1.
func parseDim3(text, sep string) (cuda.Dim3, error) {
	parts := strings.Split(text, sep)
	if len(parts) > 3 {
		return cuda.Dim3{}, fmt.Errorf("%q has more than 3 sizes", text)
	}
	v := [3]uint32{1, 1, 1}
	for i, p := range parts {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
		if err != nil || n == 0 {
			return cuda.Dim3{}, fmt.Errorf("%q: each size must be a whole number of 1 or more", text)
		}
		v[i] = uint32(n)
	}
	return cuda.Dim3{X: v[0], Y: v[1], Z: v[2]}, nil
}
