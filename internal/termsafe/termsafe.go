// Package termsafe makes text from a recording safe to print on a terminal. A recording holds
// strings the recorded program chose (its argv, host name, kernel names, NVTX messages, file
// names): printed raw, an ESC or BEL in one could retitle the window or rewrite the screen,
// and a CR or newline forge a line of gpurr's report. Every text output prints such strings
// through String, and its lines through Args where they are formatted.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// String is s with every control character escaped as Go writes it in a string literal
// (\n, \t, \x1b, \u0085): the C0 controls, DEL, the C1 controls, and the marks that reorder
// text (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069); and each byte that is not UTF-8
// as \xNN. Printable text, UTF-8 included, is kept as it is; s itself when it needs nothing.
func String(s string) string {
	i := unsafeAt(s)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !unsafe(r):
			b.WriteString(s[i : i+size])
		default:
			writeEscaped(&b, r)
		}
		i += size
	}
	return b.String()
}

// unsafeAt is the index of the first byte of s that String escapes, len(s) when none.
func unsafeAt(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafe(r) {
			return i
		}
		i += size
	}
	return len(s)
}

// unsafe: r is a control character or a mark that reorders text.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// letterEscapes are the controls Go's string literals name by a letter.
var letterEscapes = map[rune]string{'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\v': `\v`}

func writeEscaped(b *strings.Builder, r rune) {
	switch e, ok := letterEscapes[r]; {
	case ok:
		b.WriteString(e)
	case r < utf8.RuneSelf:
		fmt.Fprintf(b, `\x%02x`, r)
	default:
		fmt.Fprintf(b, `\u%04x`, r)
	}
}

// Args are the arguments of a Printf whose format is the program's and whose arguments may
// come from a recording: each string (and []string, error and fmt.Stringer) made safe by
// String. Numbers and the rest are kept.
func Args(args []any) []any {
	out := args
	for i, a := range args {
		var safe any
		switch a := a.(type) {
		case string:
			if s := String(a); s != a {
				safe = s
			}
		case []string:
			safe = Strings(a)
		case error:
			if s, safeS := a.Error(), String(a.Error()); safeS != s {
				safe = safeS
			}
		case fmt.Stringer:
			if s, safeS := a.String(), String(a.String()); safeS != s {
				safe = safeS
			}
		}
		if safe == nil {
			continue
		}
		if &out[0] == &args[0] {
			out = append([]any(nil), args...)
		}
		out[i] = safe
	}
	return out
}

// Strings is each of ss made safe by String: ss itself when none needs it.
func Strings(ss []string) []string {
	out := ss
	for i, s := range ss {
		if safe := String(s); safe != s {
			if &out[0] == &ss[0] {
				out = append([]string(nil), ss...)
			}
			out[i] = safe
		}
	}
	return out
}

// Fprintf is fmt.Fprintf with its arguments made safe (Args): for a line of a report whose
// format is the program's and whose arguments may come from a recording.
func Fprintf(w io.Writer, format string, args ...any) (int, error) {
	return fmt.Fprintf(w, format, Args(args)...)
}

// Fprintln is fmt.Fprintln with its arguments made safe (Args).
func Fprintln(w io.Writer, args ...any) (int, error) { return fmt.Fprintln(w, Args(args)...) }
