package termsafe

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "",
		"at::native::add<float>(float*, int) ü": "at::native::add<float>(float*, int) ü",
		"\x1b]0;owned\x07":                      `\x1b]0;owned\a`,
		"a\r\nb\tc\x00\x7f":                     `a\r\nb\tc\x00\x7f`,
		"c1 \u0085 \u009b":                      `c1 \u0085 \u009b`,
		"bidi \u202eevil\u2066":                 `bidi \u202eevil\u2066`,
		"bad \xff\xc3 utf8":                     `bad \xff\xc3 utf8`,
		`back\slash "quoted"`:                   `back\slash "quoted"`,
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestArgs(t *testing.T) {
	args := []any{"ok", 7, "bell\a", []string{"x", "\x1b"}, errors.New("e\n"), 2.5}
	got := fmt.Sprint(Args(args)...)
	if want := fmt.Sprint("ok", 7, `bell\a`, []string{"x", `\x1b`}, `e\n`, 2.5); got != want {
		t.Errorf("Args: %q, want %q", got, want)
	}
	if args[2] != "bell\a" {
		t.Error("Args changed its argument")
	}
	safe := []any{"ok", 1}
	if out := Args(safe); &out[0] != &safe[0] {
		t.Error("Args copies what needs nothing")
	}
	if ss := []string{"a", "b"}; !slices.Equal(Strings(ss), ss) {
		t.Error("Strings changed safe strings")
	}
}

func BenchmarkStringSafe(b *testing.B) {
	s := "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
	b.ReportAllocs()
	for b.Loop() {
		String(s)
	}
}
