package replay

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/fatbin"
	"github.com/gpurr/gpurr/internal/instrument"
)

// Options are the choices of a Session.
type Options struct {
	// Module replaces the recorded module image (a cubin, PTX or fatbin
	// holding a kernel of the same name): an A/B of a fix on the recorded
	// inputs. nil runs the recorded code.
	Module []byte
	// ModuleName names Module in messages; "" says --module (gpurr replay's flag).
	ModuleName string
	// PTX, when not nil, replaces the recorded module (and Module) with the PTX entry For
	// picks for the GPU, compiled by the driver's JIT: gpurr replay --ptx.
	PTX *ModulePTX
	// Device is the ordinal to run on; -1 picks the recorded one, else 0.
	Device int
}

// Session holds one launch ready to run: its regions mapped and filled,
// its kernel loaded. Run it as often as needed; each run starts from the
// recorded inputs. A Session belongs to the goroutine that made it (the
// CUDA context is current on its OS thread).
type Session struct {
	Case   *Case
	Device cuda.Properties
	// Relocated counts the regions the driver placed at another address
	// than the recorded one; their parameter words were moved.
	Relocated int
	// Notes are warnings for the user: relocation, pointers in memory that
	// were not moved, a different GPU than the recorded one.
	Notes []string
	// Code says what code the kernel runs when it is Options.PTX: "PTX from the recording,
	// for compute_90, JIT-compiled by the driver for sm_90"; "" otherwise.
	Code string

	ctx        *cuda.Context
	stream     *cuda.Stream
	mod        *cuda.Module
	fn         cuda.Function
	spans      []*cuda.Reservation
	addrs      []uint64         // each region's address in this process
	pristine   []cuda.DevicePtr // each region's contents before the launch
	params     []byte
	start, end *cuda.Event
	host       *cuda.HostMem // pinned read-back buffer
	moduleName string        // Options.ModuleName, for messages
}

// Result is one Run: the comparison of every region (from the first
// repetition) and the kernel time of each repetition.
type Result struct {
	Regions []RegionResult
	Times   []time.Duration
}

// Identical reports whether every region equals the recording.
func (r *Result) Identical() bool {
	for _, reg := range r.Regions {
		if !reg.Identical {
			return false
		}
	}
	return true
}

// Within reports whether every region matches under the check.
func (r *Result) Within(c Check) bool {
	for _, reg := range r.Regions {
		if !reg.Within(c) {
			return false
		}
	}
	return true
}

// Median is the median kernel time.
func (r *Result) Median() time.Duration {
	if len(r.Times) == 0 {
		return 0
	}
	t := slices.Clone(r.Times)
	slices.Sort(t)
	return t[len(t)/2]
}

// NewSession prepares c on the GPU. On error it releases what it made.
func NewSession(c *Case, o Options) (s *Session, err error) {
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, err
	}
	ordinal := o.Device
	if ordinal < 0 {
		ordinal = 0
		if c.Device != nil && int(c.Device.Ordinal) < n {
			ordinal = int(c.Device.Ordinal)
		}
	}
	if ordinal >= n {
		return nil, fmt.Errorf("no CUDA device %d (this machine has %d)", ordinal, n)
	}
	dev, err := cuda.DeviceGet(ordinal)
	if err != nil {
		return nil, err
	}
	props, err := dev.Properties()
	if err != nil {
		return nil, err
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return nil, err
	}
	s = &Session{Case: c, Device: props, ctx: ctx}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
			s = nil
		}
	}()
	if c.Device != nil && (c.Device.Name != props.Name || int(c.Device.CcMajor) != props.CCMajor || int(c.Device.CcMinor) != props.CCMinor) {
		s.Notes = append(s.Notes, fmt.Sprintf("recorded on %s (sm_%d%d), replaying on %s (%s)",
			c.Device.Name, c.Device.CcMajor, c.Device.CcMinor, props.Name, props.Arch()))
	}
	s.moduleName = o.ModuleName
	if s.moduleName == "" {
		s.moduleName = "--module"
	}
	module := o.Module
	if o.PTX != nil {
		if module, err = s.pickPTX(o.PTX); err != nil {
			return s, err
		}
	}
	if err := s.load(module); err != nil {
		return s, err
	}
	if err := s.mapRegions(); err != nil {
		return s, err
	}
	if s.stream, err = ctx.NewStream(cuda.StreamNonBlocking); err != nil {
		return s, err
	}
	if s.start, err = ctx.NewEvent(cuda.EventDefault); err != nil {
		return s, err
	}
	if s.end, err = ctx.NewEvent(cuda.EventDefault); err != nil {
		return s, err
	}
	return s, nil
}

// pickPTX picks the entry of m to run on the session's GPU, names it in messages and in Code,
// and returns its text. PTX for a newer architecture than the GPU's is refused here, in words:
// the driver's JIT would refuse it with CUDA_ERROR_INVALID_PTX and ptxas's log.
func (s *Session) pickPTX(m *ModulePTX) ([]byte, error) {
	c := s.Case
	e, err := m.For(c.Kernel.GetName(), 10*s.Device.CCMajor+s.Device.CCMinor)
	if ne := (*fatbin.NewerError)(nil); errors.As(err, &ne) {
		return nil, fmt.Errorf("the PTX of %s from %s targets compute_%d, newer than this %s (%s): the driver cannot compile it for this GPU; replay on a GPU of sm_%d or newer, or pass PTX built for compute_%d or older (--ptx=FILE)",
			c.Name, m.From, ne.Oldest, s.Device.Name, s.Device.Arch(), ne.Oldest, ne.GPU)
	}
	if err != nil {
		return nil, err
	}
	target := Target(e.Text)
	if target == "" {
		target = fmt.Sprintf("compute_%d", e.Arch)
	}
	s.moduleName = fmt.Sprintf("the PTX from %s (%s)", m.From, target)
	s.Code = fmt.Sprintf("PTX from %s, for %s, JIT-compiled by the driver for %s", m.From, target, s.Device.Arch())
	return e.Text, nil
}

// load loads the module and finds the kernel; with a replacement module it
// checks that the kernel takes the recorded parameter layout.
func (s *Session) load(replacement []byte) error {
	c := s.Case
	image, what := c.Module, "the recorded module"
	if replacement != nil {
		image, what = replacement, s.moduleName
	}
	mod, err := s.ctx.LoadModule(image)
	if err != nil {
		if errors.Is(err, cuda.ErrorUnsupportedPTX) {
			return fmt.Errorf("%s (%s) is of a PTX ISA version this driver's JIT compiler does not know (a newer CUDA made it): update the driver, or build the PTX with this driver's CUDA: %v", what, ModuleKind(image), err)
		}
		if errors.Is(err, cuda.ErrorNoBinaryForGPU) || errors.Is(err, cuda.ErrorInvalidImage) || errors.Is(err, cuda.ErrorUnsupportedPTX) {
			return fmt.Errorf("%s (%s) cannot run on this %s (%s): %v", what, ModuleKind(image), s.Device.Name, s.Device.Arch(), err)
		}
		return fmt.Errorf("%s (%s): %w", what, ModuleKind(image), err)
	}
	s.mod = mod
	if s.fn, err = mod.Function(c.Kernel.Name); err != nil {
		return fmt.Errorf("%s has no kernel %s: %w", what, c.Name, err)
	}
	if replacement != nil {
		if err := s.checkParams(); err != nil {
			return err
		}
	}
	for _, a := range c.funcAttributes() {
		if err := s.fn.SetAttribute(a.attr, a.value); err != nil {
			return fmt.Errorf("%s: %w", a.why, err)
		}
	}
	return nil
}

// Reload replaces the session's kernel with image's kernel of the same name and parameter
// layout, keeping the regions and their inputs: a run after it differs from one before only by
// the code (gpurr race runs each trial's instrumented PTX this way).
func (s *Session) Reload(image []byte) error {
	if s.mod != nil {
		if err := s.mod.Unload(); err != nil {
			return err
		}
		s.mod = nil
	}
	return s.load(image)
}

// SetGlobal writes words into the module-scope variable name of the session's module, for the
// runs after it (gpurr race's seed). The context is synchronized after the copy: a copy from
// pageable memory may return before it lands, and the session's stream does not wait for it.
func (s *Session) SetGlobal(name string, words []uint32) error {
	p, size, err := s.mod.Global(name)
	if err != nil {
		return err
	}
	if uint64(4*len(words)) > size {
		return fmt.Errorf("variable %s holds %d bytes, not %d", name, size, 4*len(words))
	}
	if err := cuda.CopyHtoD(p, words); err != nil {
		return err
	}
	return s.ctx.Synchronize()
}

// checkParams compares a replacement kernel's parameters with the recorded
// kernel's: a different layout would misread the recorded bytes.
func (s *Session) checkParams() error {
	got, err := s.fn.Params()
	if errors.Is(err, cuda.ErrNotSupported) {
		s.Notes = append(s.Notes, "this driver cannot list kernel parameters; --module's parameter layout is not checked")
		return nil
	}
	if err != nil {
		return err
	}
	want := s.Case.Kernel.Params
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		same = got[i].Offset == want[i].Offset && got[i].Size == want[i].Size
	}
	if !same {
		return fmt.Errorf("%s's %s takes %s; the recorded launch passed %s", s.moduleName, s.Case.Name, layoutText(got), recordedLayoutText(want))
	}
	return nil
}

func layoutText(ps []cuda.Param) string {
	out := fmt.Sprintf("%d parameters (", len(ps))
	for i, p := range ps {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%d@%d", p.Size, p.Offset)
	}
	return out + ")"
}

// mapRegions reserves every span at its recorded address where the driver
// allows, fills it with the before-contents, and keeps a pristine copy of
// each region for later runs.
func (s *Session) mapRegions() error {
	c := s.Case
	granule, err := s.ctx.Granularity()
	if err != nil {
		return err
	}
	s.addrs = make([]uint64, len(c.Regions))
	for _, sp := range planSpans(c, granule) {
		res, err := s.ctx.Reserve(cuda.DevicePtr(sp.start), sp.end-sp.start)
		if err != nil {
			return fmt.Errorf("recreate regions at 0x%x (%d bytes): %w", sp.start, sp.end-sp.start, err)
		}
		s.spans = append(s.spans, res)
		delta := uint64(res.Addr) - sp.start
		for _, p := range sp.pieces {
			if err := res.Back(s.ctx, p[0]-sp.start, p[1]-p[0]); err != nil {
				return fmt.Errorf("back regions at 0x%x (%d bytes) with memory: %w", p[0], p[1]-p[0], err)
			}
			if err := cuda.MemsetD8(cuda.DevicePtr(p[0]+delta), 0, int(p[1]-p[0])); err != nil {
				return err
			}
		}
		for _, i := range sp.regions {
			s.addrs[i] = c.Regions[i].Address + delta
			if delta != 0 {
				s.Relocated++
			}
		}
	}
	params, moved, err := relocate(c, c.Launch.Params, s.addrs)
	if err != nil {
		return err
	}
	s.params = params
	if s.Relocated > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("the driver placed %d of %d regions at other addresses than the recorded ones; %d parameter words were moved to match",
			s.Relocated, len(c.Regions), moved))
		for i := range c.Regions {
			for target, n := range pointerWords(c, i) {
				s.Notes = append(s.Notes, fmt.Sprintf("region %d holds %d words that look like pointers into region %d; they were not moved, and a kernel that follows them reads the wrong memory", i, n, target))
			}
		}
	}
	var largest uint64
	for i, r := range c.Regions {
		p, err := s.ctx.MemAlloc(int(r.Size))
		if err != nil {
			return fmt.Errorf("copy of region %d's inputs: %w", i, err)
		}
		s.pristine = append(s.pristine, p)
		if err := cuda.CopyHtoD(p, r.Before); err != nil {
			return err
		}
		largest = max(largest, r.Size)
	}
	if s.host, err = s.ctx.HostAlloc(int(largest)); err != nil {
		return fmt.Errorf("read-back buffer: %w", err)
	}
	return nil
}

// Run restores the inputs and launches with cfg repeat times (at least
// once), timing each launch with CUDA events, and compares the regions
// after the first launch with the recording.
func (s *Session) Run(cfg cuda.LaunchConfig, repeat int, check Check) (*Result, error) {
	res := &Result{}
	for rep := range max(repeat, 1) {
		t, err := s.launch(cfg)
		if err != nil {
			return nil, err
		}
		res.Times = append(res.Times, t)
		if rep > 0 {
			continue
		}
		for i := range s.Case.Regions {
			r := &s.Case.Regions[i]
			got := s.host.Bytes()[:r.Size]
			if err := cuda.CopyDtoH(got, cuda.DevicePtr(s.addrs[i])); err != nil {
				return nil, err
			}
			res.Regions = append(res.Regions, compare(i, r, got, check))
		}
	}
	return res, nil
}

// Probe restores the inputs, runs the launch once with cfg and returns the probe buffer the
// kernel filled: the session's module must be probed (instrument.InjectProbes, given as
// Options.Module). initial is the buffer's contents before the launch (probe.Fill).
func (s *Session) Probe(cfg cuda.LaunchConfig, initial []byte) ([]byte, error) {
	sym, _, err := s.mod.Global(instrument.ProbeSymbol)
	if err != nil {
		return nil, fmt.Errorf("the module is not probed: %w", err)
	}
	buf, err := s.ctx.MemAlloc(len(initial))
	if err != nil {
		return nil, err
	}
	defer s.ctx.MemFree(buf)
	if err := cuda.CopyHtoD(buf, initial); err != nil {
		return nil, err
	}
	if err := cuda.CopyHtoD(sym, []uint64{uint64(buf)}); err != nil {
		return nil, err
	}
	if _, err := s.launch(cfg); err != nil {
		return nil, err
	}
	out := make([]byte, len(initial))
	if err := cuda.CopyDtoH(out, buf); err != nil {
		return nil, err
	}
	return out, nil
}

// Time restores the inputs and times repeat more launches with cfg,
// without comparing: for a shape already verified by Run.
func (s *Session) Time(cfg cuda.LaunchConfig, repeat int) ([]time.Duration, error) {
	var times []time.Duration
	for range repeat {
		t, err := s.launch(cfg)
		if err != nil {
			return nil, err
		}
		times = append(times, t)
	}
	return times, nil
}

// launch restores every region's inputs and runs the kernel once, timed.
func (s *Session) launch(cfg cuda.LaunchConfig) (time.Duration, error) {
	for i, r := range s.Case.Regions {
		if err := s.stream.CopyDtoD(cuda.DevicePtr(s.addrs[i]), s.pristine[i], int(r.Size)); err != nil {
			return 0, err
		}
	}
	if err := s.start.Record(s.stream); err != nil {
		return 0, err
	}
	if err := s.stream.LaunchBuffer(s.fn, cfg, s.params); err != nil {
		return 0, err
	}
	if err := s.end.Record(s.stream); err != nil {
		return 0, err
	}
	if err := s.end.Synchronize(); err != nil {
		return 0, fmt.Errorf("the kernel failed: %w", err)
	}
	return cuda.Elapsed(s.start, s.end)
}

// Contents copies region i as the last run left it.
func (s *Session) Contents(i int) ([]byte, error) {
	out := make([]byte, s.Case.Regions[i].Size)
	if err := cuda.CopyDtoH(out, cuda.DevicePtr(s.addrs[i])); err != nil {
		return nil, err
	}
	return out, nil
}

// Address is where region i lives in this process.
func (s *Session) Address(i int) uint64 { return s.addrs[i] }

// Close frees everything the session made.
func (s *Session) Close() error {
	var errs []error
	if s.stream != nil {
		errs = append(errs, s.stream.Synchronize(), s.stream.Destroy())
	}
	for _, e := range []*cuda.Event{s.start, s.end} {
		if e != nil {
			errs = append(errs, e.Destroy())
		}
	}
	for _, p := range s.pristine {
		errs = append(errs, s.ctx.MemFree(p))
	}
	if s.host != nil {
		errs = append(errs, s.host.Free())
	}
	for _, r := range s.spans {
		errs = append(errs, r.Free())
	}
	if s.mod != nil {
		errs = append(errs, s.mod.Unload())
	}
	errs = append(errs, s.ctx.Close())
	return errors.Join(errs...)
}
