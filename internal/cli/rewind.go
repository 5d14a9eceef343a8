package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/rewind"
	"github.com/gpurr/gpurr/internal/termsafe"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memview"
)

type rewindOptions struct {
	launch        uint64
	before, after bool
	region        int
	addr          string
	length        uint64
	out           string
	process       string
	force         bool
	npy           bool
	dtype         string
	shape         string
}

func newRewindCmd() *cobra.Command {
	var o rewindOptions
	cmd := &cobra.Command{
		Use:   "rewind REC --launch SEQ (--before|--after) (--region N | --addr 0xADDR [--len N]) -o FILE",
		Short: "Write a buffer as it was just before or after a snapshotted launch",
		Long: `rewind rebuilds a region of a launch (the whole allocation a parameter
pointed into) from the chunks a --memory snapshot recording stored, as it was
just before or just after that launch ran, and writes its bytes to FILE
("-" for stdout). --addr picks the region holding an address and, with
--len, writes only that range. Before a launch with no snapshot of its own,
it writes the region's latest state before it, as a recording of format
1.17 or later holds it: after the copy or launch that last wrote it, when
that was snapshotted, or zeros for an allocation gpurr cleared that
nothing wrote since; it says which on stderr.`,
		Example: `  gpurr rewind run1 --launch 42 --after --region 0 -o out.bin
  gpurr rewind run1 --launch 42 --before --addr 0x7f1c2a000200 --len 4096 -o in.bin
  gpurr rewind run1 --launch 42 --after --region 1 --npy --dtype bf16 --shape 8,1024 -o out.npy`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runRewind(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	launchVar(f, &o.launch, "launch", "launch sequence number (as gpurr info and the launches table show it)")
	f.BoolVar(&o.before, "before", false, "contents just before the launch")
	f.BoolVar(&o.after, "after", false, "contents just after the launch")
	unsetIntVar(f, &o.region, "region", "region index of the launch (the regions table lists them)")
	f.StringVar(&o.addr, "addr", "", "a device address inside one of the launch's regions (hex)")
	sizeVar(f, &o.length, "len", 0, "with --addr: bytes to write from the address (default: to the region's end)")
	outputVar(f, &o.out, "output", "o", "", "file to write, - for stdout")
	f.BoolVar(&o.force, "force", false, "replace the -o file when it exists")
	f.BoolVar(&o.npy, "npy", false, "write a NumPy .npy file (needs --dtype; --shape, else one dimension)")
	dtypeVar(cmd, &o.dtype, "with --npy: the element type, one of f32, f64, f16, bf16 (stored as uint16), i8, u8, i16, i32, u32 or i64")
	f.StringVar(&o.shape, "shape", "", "with --npy: dimensions, e.g. 8,1024,768 (their product must match the bytes written)")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	return cmd
}

func runRewind(cmd *cobra.Command, o rewindOptions, path string) error {
	switch {
	case !cmd.Flags().Changed("launch"):
		return usageErrorf("rewind: --launch is required")
	case o.before && o.after:
		return usageErrorf("rewind: --before and --after: say one (run rewind twice for both)")
	case !o.before && !o.after:
		return usageErrorf("rewind: say --before or --after")
	case o.region >= 0 && o.addr != "":
		return usageErrorf("rewind: --region and --addr: say one")
	case o.region < 0 && o.addr == "":
		return usageErrorf("rewind: say --region N or --addr 0xADDR")
	case cmd.Flags().Changed("len") && o.addr == "":
		return usageErrorf("rewind: --len goes with --addr (--region writes the whole region)")
	case cmd.Flags().Changed("len") && o.length == 0:
		return usageErrorf("rewind: --len 0 writes nothing: leave it out to write to the region's end")
	}
	if o.out == "" {
		return usageErrorf("rewind: -o FILE is required (- for stdout)")
	}
	t, shape, err := npyOptions(o)
	if err != nil {
		return err
	}
	var addr uint64
	if o.addr != "" {
		a, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(o.addr), "0x"), 16, 64)
		if errors.Is(err, strconv.ErrRange) {
			return usageErrorf("rewind: --addr %s is wider than 64 bits: no device address is", o.addr)
		}
		if err != nil {
			return usageErrorf("rewind: --addr %q is not a hex address", o.addr)
		}
		addr = a
	}
	set, err := openRecording(cmd, path)
	if err != nil {
		return err
	}
	proc, err := pickProcess("rewind", set, o.process)
	if err != nil {
		return err
	}
	req := rewind.Request{Launch: o.launch, Point: memview.After, Region: o.region, ByAddr: o.addr != "", Addr: addr, Len: o.length}
	if o.before {
		req.Point = memview.Before
	}
	res, err := rewind.Rewind(proc, req)
	if err != nil {
		return usageErrorf("rewind: %v", err)
	}
	if res.From != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "rewind: launch %d has no snapshot before it: region %d is its latest state before it, %s\n",
			o.launch, res.Index, termsafe.String(res.From))
	}
	if len(res.Tears) > 0 {
		warnf(cmd, "the state %s launch %d is torn: %s; its bytes may be part from before, part from after their writes",
			recording.EnumText(req.Point), o.launch, recording.JoinTears(res.Tears))
	}
	buf := res.Data
	if o.npy {
		if buf, err = t.NPY(buf, shape); err != nil {
			return usageErrorf("rewind: --npy: %v", err)
		}
	}
	w, err := createOutput("rewind", o.out, cmd.OutOrStdout(), o.force, path)
	if err != nil {
		return err
	}
	defer w.Abort()
	if _, err := w.Write(buf); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("rewind: write %s: %v", o.out, plainError(err))}
	}
	if err := w.Commit(); err != nil {
		return err
	}
	if o.out != "-" {
		fmt.Fprintf(cmd.ErrOrStderr(), "rewind: wrote %d bytes of region %d (0x%x, %d bytes) %s launch %d to %s\n",
			len(buf), res.Index, res.Region.Address, res.Region.Size, recording.EnumText(req.Point), o.launch, o.out)
	}
	return nil
}

// npyOptions checks --npy, --dtype and --shape.
func npyOptions(o rewindOptions) (*dtype.Type, []int, error) {
	if !o.npy {
		if o.dtype != "" || o.shape != "" {
			return nil, nil, usageErrorf("rewind: --dtype and --shape go with --npy")
		}
		return nil, nil, nil
	}
	if o.dtype == "" {
		return nil, nil, usageErrorf("rewind: --npy needs --dtype")
	}
	t, err := dtype.Parse(o.dtype)
	if err != nil {
		return nil, nil, usageErrorf("rewind: --dtype: %v", err)
	}
	var shape []int
	if o.shape != "" {
		for _, f := range strings.Split(o.shape, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				return nil, nil, usageErrorf("rewind: --shape %q: want sizes like 8,1024", o.shape)
			}
			shape = append(shape, n)
		}
	}
	return t, shape, nil
}
