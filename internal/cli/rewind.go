package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

type rewindOptions struct {
	launch        uint64
	before, after bool
	region        int
	addr          string
	length        uint64
	out           string
	process       string
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
--len, writes only that range.`,
		Example: `  gpurr rewind run1 --launch 42 --after --region 0 -o out.bin
  gpurr rewind run1 --launch 42 --before --addr 0x7f1c2a000200 --len 4096 -o in.bin
  gpurr rewind run1 --launch 42 --after --region 1 --npy --dtype bf16 --shape 8,1024 -o out.npy`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runRewind(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	f.Uint64Var(&o.launch, "launch", 0, "launch sequence number (as gpurr info and the launches table show it)")
	f.BoolVar(&o.before, "before", false, "contents just before the launch")
	f.BoolVar(&o.after, "after", false, "contents just after the launch")
	f.IntVar(&o.region, "region", -1, "region index of the launch (the regions table lists them)")
	f.StringVar(&o.addr, "addr", "", "a device address inside one of the launch's regions (hex)")
	f.Uint64Var(&o.length, "len", 0, "with --addr: bytes to write from the address (default: to the region's end)")
	f.StringVarP(&o.out, "output", "o", "", "file to write, - for stdout")
	f.BoolVar(&o.npy, "npy", false, "write a NumPy .npy file (needs --dtype; --shape, else one dimension)")
	f.StringVar(&o.dtype, "dtype", "", "with --npy: element type, f32, f64, f16, bf16 (stored as uint16), i8, u8, i16, i32, u32 or i64")
	completeValues(cmd, "dtype", dtype.Names()...)
	f.StringVar(&o.shape, "shape", "", "with --npy: dimensions, e.g. 8,1024,768 (their product must match the bytes written)")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	return cmd
}

func runRewind(cmd *cobra.Command, o rewindOptions, path string) error {
	if o.launch == 0 {
		return usageErrorf("rewind: --launch is required")
	}
	if o.before == o.after {
		return usageErrorf("rewind: say --before or --after")
	}
	if (o.region < 0) == (o.addr == "") {
		return usageErrorf("rewind: say --region N or --addr 0xADDR")
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
		if err != nil {
			return usageErrorf("rewind: --addr %q is not a hex address", o.addr)
		}
		addr = a
	}
	set, err := openRecording(cmd, path)
	if err != nil {
		return err
	}
	proc, err := pickProcess(set, o.process)
	if err != nil {
		return err
	}
	data, err := proc.Load()
	if err != nil {
		return usageErrorf("rewind: %v", err)
	}
	links := data.Links()
	launch := links.Launch(o.launch)
	if launch == nil {
		return usageErrorf("rewind: %s has no launch %d", proc.Name, o.launch)
	}
	point, pointName := pb.MemoryState_AFTER, "after"
	if o.before {
		point, pointName = pb.MemoryState_BEFORE, "before"
	}
	var state *pb.MemoryState
	for _, s := range links.MemoryFor(o.launch) {
		if s.Point == point {
			state = s
		}
	}
	switch {
	case data.Process.GetMemory().GetMode() != "snapshot":
		return usageErrorf("rewind: %s was recorded without snapshots (record with --memory snapshot)", proc.Name)
	case state == nil:
		return usageErrorf("rewind: launch %d has no memory state %s it (status %s; not selected for snapshots?)",
			o.launch, pointName, recording.EnumText(launch.GetMemory().GetStatus()))
	case state.Lost:
		return usageErrorf("rewind: the state %s launch %d was lost: %s", pointName, o.launch, state.LostReason)
	case !state.Snapshot:
		return usageErrorf("rewind: launch %d has only hashes %s it, no contents (snapshot selection or flight-recorder window)", o.launch, pointName)
	}
	idx := o.region
	if o.addr != "" {
		idx = -1
		for i, r := range launch.Regions {
			if addr >= r.Address && addr-r.Address < r.Size {
				idx = i
			}
		}
		if idx < 0 {
			return usageErrorf("rewind: 0x%x is outside every region of launch %d: %s", addr, o.launch, nearestRegions(launch.Regions, addr))
		}
	}
	if idx >= len(launch.Regions) || idx >= len(state.Regions) {
		return usageErrorf("rewind: launch %d has %s; no region %d", o.launch, info.Count(len(launch.Regions), "region"), idx)
	}
	region := launch.Regions[idx]
	store, err := chunkstore.Open(proc.Dir)
	if err != nil {
		return usageErrorf("rewind: %v", err)
	}
	defer store.Close()
	start, end := uint64(0), region.Size
	if o.addr != "" {
		start = addr - region.Address
		if o.length > 0 {
			end = min(region.Size, start+o.length)
		}
	}
	buf, missing, err := store.Assemble(recording.ChunkHashes(state.Regions[idx]), uint64(data.Process.GetMemory().GetChunkBytes()), start, end)
	switch {
	case err != nil:
		return usageErrorf("rewind: region %d: %v", idx, err)
	case len(missing) > 0:
		return usageErrorf("rewind: region %d: %d of its chunks in this range were dropped while recording (--on-full drop-oldest), first chunk %d", idx, len(missing), missing[0])
	}
	if o.npy {
		if buf, err = t.NPY(buf, shape); err != nil {
			return usageErrorf("rewind: --npy: %v", err)
		}
	}
	if o.out == "-" {
		_, err = cmd.OutOrStdout().Write(buf)
	} else {
		err = os.WriteFile(o.out, buf, 0o644)
	}
	if err != nil {
		return fmt.Errorf("rewind: %w", err)
	}
	if o.out != "-" {
		fmt.Fprintf(cmd.ErrOrStderr(), "rewind: wrote %d bytes of region %d (0x%x, %d bytes) %s launch %d to %s\n",
			len(buf), idx, region.Address, region.Size, pointName, o.launch, o.out)
	}
	return nil
}

// nearestRegions names the regions that end closest below addr and start
// closest above it, for a message about an address in none of them.
func nearestRegions(regions []*pb.Region, addr uint64) string {
	below, above := -1, -1
	for i, r := range regions {
		if end := r.Address + r.Size; end <= addr && (below < 0 || end > regions[below].Address+regions[below].Size) {
			below = i
		}
		if r.Address > addr && (above < 0 || r.Address < regions[above].Address) {
			above = i
		}
	}
	span := func(i int) string {
		r := regions[i]
		return fmt.Sprintf("region %d [0x%x, 0x%x)", i, r.Address, r.Address+r.Size)
	}
	var near []string
	if below >= 0 {
		near = append(near, fmt.Sprintf("%s ends %d bytes below it", span(below), addr-(regions[below].Address+regions[below].Size)))
	}
	if above >= 0 {
		near = append(near, fmt.Sprintf("%s starts %d bytes above it", span(above), regions[above].Address-addr))
	}
	if len(near) == 0 {
		return "it has no regions"
	}
	return "nearest, " + strings.Join(near, "; ") + " (gpurr query REC 'SELECT * FROM regions' lists them)"
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
