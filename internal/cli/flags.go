package cli

import (
	"errors"
	"strconv"

	"github.com/spf13/pflag"
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
