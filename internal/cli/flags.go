package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/instrument"
)

// unsetInt is an integer flag of 0 or more that may be left unset, which its variable holds
// as -1. Help prints no "(default -1)" for it (pflag prints every default but zero): its
// usage says what leaving it out means ("default: the recorded one").
type unsetInt[T int | int64] struct{ p *T }

func (u unsetInt[T]) String() string {
	if u.p == nil || *u.p == -1 {
		return ""
	}
	return strconv.FormatInt(int64(*u.p), 10)
}

// Set takes 0 or more: a negative value would read as unset (-1) or mean nothing, and be
// passed over in silence.
func (u unsetInt[T]) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, 64)
	if errors.Is(err, strconv.ErrRange) {
		return err
	}
	if err != nil || v < 0 {
		return errors.New("want a whole number, 0 or more")
	}
	*u.p = T(v)
	return nil
}

func (u unsetInt[T]) Type() string { return "int" }

// unsetIntVar defines an integer flag that is -1 until set, and shows no default.
func unsetIntVar[T int | int64](f *pflag.FlagSet, p *T, name, usage string) {
	*p = -1
	f.Var(unsetInt[T]{p}, name, usage)
}

// launchNumber is a flag naming a launch by its sequence number, which starts at 1; its
// variable holds 0 until it is set. 0 is refused, not taken for unset: the verb would
// otherwise pick a launch of its own, or say that none was named.
type launchNumber struct{ p *uint64 }

func (l launchNumber) String() string {
	if l.p == nil || *l.p == 0 {
		return ""
	}
	return strconv.FormatUint(*l.p, 10)
}

func (l launchNumber) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return err
	case err != nil:
		return errors.New("want a launch number as gpurr info and the launches table show it")
	case v == 0:
		return errors.New("launches are numbered from 1")
	}
	*l.p = v
	return nil
}

func (l launchNumber) Type() string { return "uint" }

// launchVar defines a flag naming a launch (launchNumber).
func launchVar(f *pflag.FlagSet, p *uint64, name, usage string) {
	f.Var(launchNumber{p}, name, usage)
}

// count is a flag that says how many times to do something: a whole number from lo to hi,
// said when the flag is read. A negative count would otherwise run nothing without a word,
// and one of billions run for days.
type count struct {
	p      *int
	lo, hi int
}

func (c count) String() string {
	if c.p == nil {
		return ""
	}
	return strconv.Itoa(*c.p)
}

func (c count) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < int64(c.lo) || v > int64(c.hi) {
		return fmt.Errorf("want a whole number from %d to %d", c.lo, c.hi)
	}
	*c.p = int(v)
	return nil
}

func (c count) Type() string { return "int" }

// maxCount is the most runs a count flag takes: at a millisecond a run, most of a minute.
const maxCount = 100000

// countVar defines a count flag (count) with its default.
func countVar(f *pflag.FlagSet, p *int, name string, value, lo int, usage string) {
	*p = value
	f.Var(count{p, lo, maxCount}, name, usage)
}

// duration is a time flag whose bad values are said in the user's terms: Go's parser says
// 'time: missing unit in duration "2"'.
type duration struct{ p *time.Duration }

func (d duration) String() string {
	if d.p == nil {
		return ""
	}
	return d.p.String()
}

func (d duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a time with its unit, such as 500ns, 2us or 1ms")
	}
	*d.p = v
	return nil
}

func (d duration) Type() string { return "duration" }

// durationVar defines a time flag (duration) with its default.
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var(duration{p}, name, usage)
}

// outputPath is a flag naming where a verb writes: a file, a folder, or - for standard
// output where the verb writes a stream. An empty value is refused rather than taken for
// the flag left out (a default name, a temporary folder) or for the working directory.
// /dev/stdout (/dev/fd/1) is -: the verb then keeps its report off standard output, as for -.
type outputPath struct{ p *string }

func (o outputPath) String() string {
	if o.p == nil {
		return ""
	}
	return *o.p
}

func (o outputPath) Set(s string) error {
	if s == "" {
		return errors.New("an empty name: give a path")
	}
	if fd, ok := descriptorPath(s); ok && fd == 1 {
		s = "-"
	}
	*o.p = s
	return nil
}

func (o outputPath) Type() string { return "string" }

// outputVar defines an output flag (outputPath), short its one-letter name or "".
func outputVar(f *pflag.FlagSet, p *string, name, short, value, usage string) {
	*p = value
	f.VarP(outputPath{p}, name, short, usage)
}

// size is a flag holding a number of bytes: a plain number or one with its unit, 64MiB (or
// 64 MiB, powers of 1024) or 64MB (powers of 1000), as go-humanize reads them; help prints
// the default with its unit. An int64 variable that holds -1 is unset: help prints no
// default for it (its usage says what leaving it out means).
type size[T int64 | uint64] struct{ p *T }

func (s size[T]) String() string {
	switch {
	case s.p == nil || int64(*s.p) < 0:
		return ""
	case *s.p == 0:
		return "0" // shown as no default
	}
	return humanize.IBytes(uint64(*s.p))
}

func (s size[T]) Set(v string) error {
	n, err := humanize.ParseBytes(v)
	switch {
	case err != nil && strings.Contains(err.Error(), "too large"), err == nil && n > math.MaxInt64:
		return errors.New("out of range")
	case err != nil:
		return errors.New("want a whole number, 0 or more, of bytes or with a unit: 4096, 64KiB, 1GiB")
	}
	*s.p = T(n)
	return nil
}

func (s size[T]) Type() string { return "size" }

// sizeVar defines a size flag with its default.
func sizeVar(f *pflag.FlagSet, p *uint64, name string, value uint64, usage string) {
	*p = value
	f.Var(size[uint64]{p}, name, usage)
}

// unsetSizeVar defines a size flag that is -1 until set, and shows no default.
func unsetSizeVar(f *pflag.FlagSet, p *int64, name, usage string) {
	*p = -1
	f.Var(size[int64]{p}, name, usage)
}

// dtypes is --dtype: the element type memory is decoded or compared as. Where one type is
// wanted (diff, rewind, replay, tune) a list is refused, saying so; nan takes a
// comma-separated list of floating-point types, and looks for NaN as each. The names are
// checked when the flag is read: an empty one is refused, not taken for the flag left out.
type dtypes struct {
	p    *string
	list bool // nan's: floating-point types, comma-separated
}

func (d dtypes) String() string {
	if d.p == nil {
		return ""
	}
	return *d.p
}

func (d dtypes) Set(v string) error {
	var err error
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("an empty type: want %s", d.want())
	case d.list:
		_, err = dtype.ParseFloatList(v)
	case strings.Contains(v, ","):
		return fmt.Errorf("one type here, not a list (gpurr nan takes a list): want %s", d.want())
	default:
		_, err = dtype.Parse(strings.TrimSpace(v))
	}
	if err != nil {
		return err
	}
	*d.p = strings.TrimSpace(v)
	return nil
}

// want names what the flag takes.
func (d dtypes) want() string {
	if d.list {
		return "floating-point types, comma-separated: f32, f64, f16, bf16"
	}
	return "one of " + strings.Join(dtype.Names(), ", ")
}

func (d dtypes) Type() string {
	if d.list {
		return "dtypes"
	}
	return "dtype"
}

// dtypeVar defines --dtype taking one type, with the shell completing the names.
func dtypeVar(cmd *cobra.Command, p *string, usage string) {
	cmd.Flags().Var(dtypes{p: p}, "dtype", usage)
	completeValues(cmd, "dtype", dtype.Names()...)
}

// dtypeListVar defines nan's --dtype: floating-point types, comma-separated, with a default.
func dtypeListVar(cmd *cobra.Command, p *string, value, usage string) {
	*p = value
	cmd.Flags().Var(dtypes{p: p, list: true}, "dtype", usage)
	completeValues(cmd, "dtype", "f32", "f64", "f16", "bf16")
}

// classNameList is the instruction classes race's --at and probe's --count take.
func classNameList() []string {
	var out []string
	for _, c := range instrument.Classes {
		out = append(out, string(c))
	}
	return out
}

// classNames lists the instruction classes for a flag's help.
func classNames() string { return strings.Join(classNameList(), ", ") }
