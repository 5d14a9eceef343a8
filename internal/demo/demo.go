// Package demo is gpurr's built-in workload, the training loop gpurr demo
// records, and the recordings of them that ship in the binary.
//
// RunWorkload runs a small, deterministic sequence of gpurr's own kernels
// (package kernels) on device 0 through package cuda, and checks the
// results bit for bit against the same computation on the host. gpurr
// doctor records it to check that injection works.
//
// gpurr demo's story is TrainScript, a small PyTorch training loop: two
// runs that part ways (a learning rate one float32 ulp apart) and end in a
// NaN. It records them on a GPU with torch; elsewhere it walks through the
// recordings of them that ship in the binary (HasTrain, ExtractTrain). The
// story variants of the workload (StoryA, StoryB) are its stand-in on a GPU
// without torch, and in builds without those recordings (HasStory,
// ExtractStory).
package demo

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/kernels"
)

// The workload's shape. Each of Streams streams owns its buffers and runs
// one fill of y, then Iterations rounds of fill x, saxpy, reduce.
const (
	Elements   = 1 << 16
	Streams    = 2
	Iterations = 3
	// Launches is how many kernels RunWorkload launches.
	Launches = Streams * (1 + 3*Iterations)

	// StoryElements is the story's buffer size: small, so that snapshots of
	// every saxpy of both runs ship inside the binary.
	StoryElements = 1 << 12
	// StoryLaunches is how many kernels a story variant launches: the
	// workload's, then on stream 0 a fill of x that holds zeros and a saxpy
	// that overflows.
	StoryLaunches = Launches + 2

	fillBlock   = 256
	saxpyGrid   = 64
	saxpyBlock  = 128
	reduceGrid  = 32
	reduceBlock = 256 // a power of two, as gpurr_demo_reduce needs
	saxpyA      = float32(2)
)

// Variant picks what RunWorkload runs.
type Variant string

const (
	Plain  Variant = ""  // the workload
	StoryA Variant = "a" // the story's first run
	// StoryB is the story's second run: stream 1's second fill of x takes an
	// offset one higher, as a value read from a clock or an unseeded random
	// generator would. The runs part ways at that launch.
	StoryB Variant = "b"
)

// ParseVariant reads a Variant's name ("", "a" or "b").
func ParseVariant(name string) (Variant, error) {
	switch v := Variant(name); v {
	case Plain, StoryA, StoryB:
		return v, nil
	}
	return "", fmt.Errorf("unknown demo variant %q (want a or b)", name)
}

func (v Variant) elements() int {
	if v == Plain {
		return Elements
	}
	return StoryElements
}

// OverflowScale is the story's last saxpy's a: +Inf, as a loss scale that
// overflowed would be. Its x is filled with i mod 1024 first, so where x is
// 0 (every 1024th element) the product is NaN, and Inf elsewhere.
var OverflowScale = float32(math.Inf(1))

// The story's last fill of x: i*1 + 0, mod 1024.
const storyFillMul, storyFillAdd = 1, 0

// fillY and fillX give the mul and add of gpurr_demo_fill for stream s:
// for y once, and for x in iteration it.
func fillY(s int) (mul, add uint32) { return uint32(3 + s), uint32(7 * s) }

func (v Variant) fillX(s, it int) (mul, add uint32) {
	mul, add = uint32(2+2*s+it), uint32(11*it+100*s)
	if v == StoryB && s == 1 && it == 1 {
		add++
	}
	return mul, add
}

// fill is gpurr_demo_fill on the host.
func fill(x []float32, mul, add uint32) {
	for i := range x {
		x[i] = float32((uint32(i)*mul + add) & 1023)
	}
}

// Expected is the result of the workload on one stream: y after the last
// iteration and the accumulated reduction.
type Expected struct {
	Y   []float32
	Sum uint64
}

// Compute runs stream s's part of the workload on the host. Every value is
// an integer below 2^24, so float32 arithmetic is exact and a fused
// multiply-add on the GPU gives the same bits.
func Compute(s int) Expected { return Plain.compute(s) }

func (v Variant) compute(s int) Expected {
	n := v.elements()
	y := make([]float32, n)
	x := make([]float32, n)
	mul, add := fillY(s)
	fill(y, mul, add)
	var sum uint64
	for it := range Iterations {
		mul, add := v.fillX(s, it)
		fill(x, mul, add)
		saxpy(saxpyA, x, y)
		for _, v := range y {
			sum += uint64(v)
		}
	}
	if v != Plain && s == 0 {
		fill(x, storyFillMul, storyFillAdd)
		saxpy(OverflowScale, x, y)
	}
	return Expected{Y: y, Sum: sum}
}

func saxpy(a float32, x, y []float32) {
	for i := range y {
		y[i] = float32(a*x[i]) + y[i]
	}
}

// stream is one stream's device state.
type stream struct {
	s    *cuda.Stream
	x, y cuda.DevicePtr
	sum  cuda.DevicePtr
}

// RunWorkload runs the workload on device 0, writes a short report to w
// and returns the number of kernels it launched. It returns an error when
// a CUDA call fails or a result differs from the host's.
func RunWorkload(w io.Writer, v Variant) (launches int, err error) {
	n := v.elements()
	if err := cuda.Init(); err != nil {
		return 0, err
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		return 0, err
	}
	props, err := dev.Properties()
	if err != nil {
		return 0, err
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := ctx.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()

	mod, err := ctx.LoadModule(kernels.DemoPTX())
	if err != nil {
		return 0, fmt.Errorf("loading the demo kernels on %s (%s): %w", props.Name, props.Arch(), err)
	}
	defer mod.Unload()
	var fns [3]cuda.Function
	for i, name := range []string{kernels.DemoFill, kernels.DemoSaxpy, kernels.DemoReduce} {
		if fns[i], err = mod.Function(name); err != nil {
			return 0, err
		}
	}
	fillFn, saxpyFn, reduceFn := fns[0], fns[1], fns[2]

	streams := make([]*stream, Streams)
	defer func() {
		for _, st := range streams {
			if st != nil {
				st.free(ctx)
			}
		}
	}()
	for i := range streams {
		st := &stream{}
		streams[i] = st
		if st.s, err = ctx.NewStream(cuda.StreamDefault); err != nil {
			return 0, err
		}
		for _, p := range []*cuda.DevicePtr{&st.x, &st.y} {
			if *p, err = ctx.MemAlloc(n * 4); err != nil {
				return 0, err
			}
		}
		if st.sum, err = ctx.MemAlloc(8); err != nil {
			return 0, err
		}
		// Streams created with StreamDefault wait for this copy, which
		// runs on the legacy default stream.
		if err := cuda.CopyHtoD(st.sum, []uint64{0}); err != nil {
			return 0, err
		}
	}

	start, err := ctx.NewEvent(cuda.EventDefault)
	if err != nil {
		return 0, err
	}
	defer start.Destroy()
	end, err := ctx.NewEvent(cuda.EventDefault)
	if err != nil {
		return 0, err
	}
	defer end.Destroy()

	one := func(n uint32) cuda.Dim3 { return cuda.Dim3{X: n, Y: 1, Z: 1} }
	fillGrid := one(uint32(n+fillBlock-1) / fillBlock)
	launch := func(st *stream, f cuda.Function, grid, block cuda.Dim3, shared uint32, args ...any) error {
		if err := st.s.Launch(f, grid, block, shared, args...); err != nil {
			return err
		}
		launches++
		return nil
	}

	// The launches alternate between the streams, so a recording shows
	// two streams' work interleaved.
	if err := start.Record(streams[0].s); err != nil {
		return 0, err
	}
	for s, st := range streams {
		mul, add := fillY(s)
		if err := launch(st, fillFn, fillGrid, one(fillBlock), 0, st.y, uint32(n), mul, add); err != nil {
			return launches, err
		}
	}
	for it := range Iterations {
		for s, st := range streams {
			mul, add := v.fillX(s, it)
			if err := launch(st, fillFn, fillGrid, one(fillBlock), 0, st.x, uint32(n), mul, add); err != nil {
				return launches, err
			}
			if err := launch(st, saxpyFn, one(saxpyGrid), one(saxpyBlock), 0, uint32(n), saxpyA, st.x, st.y); err != nil {
				return launches, err
			}
			if err := launch(st, reduceFn, one(reduceGrid), one(reduceBlock), reduceBlock*8, st.y, uint32(n), st.sum); err != nil {
				return launches, err
			}
		}
	}
	if v != Plain {
		st := streams[0]
		if err := launch(st, fillFn, fillGrid, one(fillBlock), 0, st.x, uint32(n), uint32(storyFillMul), uint32(storyFillAdd)); err != nil {
			return launches, err
		}
		if err := launch(st, saxpyFn, one(saxpyGrid), one(saxpyBlock), 0, uint32(n), OverflowScale, st.x, st.y); err != nil {
			return launches, err
		}
	}
	for _, st := range streams[1:] {
		if err := st.s.Synchronize(); err != nil {
			return launches, err
		}
	}
	if err := end.Record(streams[0].s); err != nil {
		return launches, err
	}
	if err := end.Synchronize(); err != nil {
		return launches, err
	}
	gpu, err := cuda.Elapsed(start, end)
	if err != nil {
		return launches, err
	}

	for s, st := range streams {
		if err := st.verify(v, s); err != nil {
			return launches, err
		}
	}
	fmt.Fprintf(w, "demo workload: %d launches on %d streams on %s (%s), %s of GPU time; results match the host's\n",
		launches, Streams, props.Name, props.Arch(), gpu.Round(time.Microsecond))
	return launches, nil
}

// verify copies the stream's results back and compares them with the host's.
func (st *stream) verify(v Variant, s int) error {
	want := v.compute(s)
	y := make([]float32, len(want.Y))
	if err := cuda.CopyDtoH(y, st.y); err != nil {
		return err
	}
	for i := range y {
		// The GPU's NaN and Go's differ in their payload bits: any NaN is the same result.
		bothNaN := y[i] != y[i] && want.Y[i] != want.Y[i]
		if y[i] != want.Y[i] && !bothNaN {
			return fmt.Errorf("demo workload: stream %d: y[%d] = %v on the GPU, %v on the host", s, i, y[i], want.Y[i])
		}
	}
	sum := []uint64{0}
	if err := cuda.CopyDtoH(sum, st.sum); err != nil {
		return err
	}
	if sum[0] != want.Sum {
		return fmt.Errorf("demo workload: stream %d: reduction = %d on the GPU, %d on the host", s, sum[0], want.Sum)
	}
	return nil
}

func (st *stream) free(ctx *cuda.Context) {
	for _, p := range []cuda.DevicePtr{st.x, st.y, st.sum} {
		if p != 0 {
			ctx.MemFree(p)
		}
	}
	st.s.Destroy()
}
