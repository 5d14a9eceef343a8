package ptx

import (
	"fmt"
	"strconv"
)

// Error is a parse error at one PTX line.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("ptx line %d: %s", e.Line, e.Msg) }

type tokKind uint8

const (
	tEOF       tokKind = iota
	tIdent             // %rd1, $L__BB0_2, foo, ld.global.f32, %tid.x
	tDirective         // .reg, .b32, .shared::cta
	tNumber            // 12, 0x1F, 0f3F800000, 9.0
	tString            // "path", quotes and escapes kept
	tPunct             // one character of , ; : ( ) [ ] { } < > + - ! | @ =
)

type token struct {
	kind tokKind
	text string
	line int
}

// lexer splits PTX text into tokens, dropping whitespace and comments.
// Token texts are slices of one copy of the source, so that tokens cost no
// allocation (the module keeps that copy alive).
type lexer struct {
	src  string
	pos  int
	line int
}

var punctText [256]string

func init() {
	for _, c := range ",;:()[]{}<>+-!|@=" {
		punctText[c] = string(c)
	}
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isIdentChar(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '_' || c == '$'
}

func (l *lexer) fail(line int, format string, args ...any) {
	panic(&Error{Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (l *lexer) text(start int) string { return l.src[start:l.pos] }

// skip passes whitespace and comments.
func (l *lexer) skip() {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '/':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '*':
			start := l.line
			l.pos += 2
			for {
				if l.pos+1 >= len(l.src) {
					l.fail(start, "unterminated /* comment")
				}
				if l.src[l.pos] == '*' && l.src[l.pos+1] == '/' {
					l.pos += 2
					break
				}
				if l.src[l.pos] == '\n' {
					l.line++
				}
				l.pos++
			}
		default:
			return
		}
	}
}

// name consumes identifier characters and the ".part" and "::part"
// continuations of opcodes, modifiers and special registers.
func (l *lexer) name() {
	for {
		for l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
			l.pos++
		}
		switch {
		case l.pos+1 < len(l.src) && l.src[l.pos] == '.' && isIdentChar(l.src[l.pos+1]):
			l.pos++
		case l.pos+2 < len(l.src) && l.src[l.pos] == ':' && l.src[l.pos+1] == ':' && isIdentChar(l.src[l.pos+2]):
			l.pos += 2
		default:
			return
		}
	}
}

func (l *lexer) next() token {
	l.skip()
	if l.pos >= len(l.src) {
		return token{kind: tEOF, line: l.line}
	}
	start, c := l.pos, l.src[l.pos]
	switch {
	case isLetter(c) || c == '_' || c == '$' || c == '%':
		l.pos++
		if c == '%' && (l.pos >= len(l.src) || !isIdentChar(l.src[l.pos])) {
			l.fail(l.line, "%% must start a register name")
		}
		l.name()
		return token{kind: tIdent, text: l.text(start), line: l.line}
	case c == '.':
		l.pos++
		if l.pos >= len(l.src) || !(isLetter(l.src[l.pos]) || l.src[l.pos] == '_') {
			l.fail(l.line, "'.' must start a directive")
		}
		for {
			for l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
				l.pos++
			}
			if l.pos+2 < len(l.src) && l.src[l.pos] == ':' && l.src[l.pos+1] == ':' && isIdentChar(l.src[l.pos+2]) {
				l.pos += 2
				continue
			}
			break
		}
		return token{kind: tDirective, text: l.text(start), line: l.line}
	case isDigit(c):
		l.number()
		t := l.text(start)
		if !validNumber(t) {
			l.fail(l.line, "malformed number %s", quote(t))
		}
		return token{kind: tNumber, text: t, line: l.line}
	case c == '"':
		l.pos++
		for {
			if l.pos >= len(l.src) || l.src[l.pos] == '\n' {
				l.fail(l.line, "unterminated string")
			}
			if l.src[l.pos] == '\\' {
				if l.pos+1 >= len(l.src) || l.src[l.pos+1] == '\n' {
					l.fail(l.line, "unterminated string")
				}
				l.pos += 2
				continue
			}
			if l.src[l.pos] == '"' {
				l.pos++
				break
			}
			l.pos++
		}
		return token{kind: tString, text: l.text(start), line: l.line}
	case punctText[c] != "":
		l.pos++
		return token{kind: tPunct, text: punctText[c], line: l.line}
	}
	l.fail(l.line, "unexpected character %s", strconv.QuoteRune(rune(c)))
	return token{}
}

// number consumes a numeric literal's characters; validNumber judges them.
func (l *lexer) number() {
	start := l.pos
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if isLetter(c) || isDigit(c) || c == '.' || c == '_' {
			l.pos++
			continue
		}
		// The sign of a decimal exponent: 1.5e-3.
		if (c == '-' || c == '+') && (l.src[l.pos-1]|0x20) == 'e' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]) && !hexPrefixed(l.src[start:l.pos]) {
			l.pos++
			continue
		}
		return
	}
}

func hexPrefixed(b string) bool {
	return len(b) >= 2 && b[0] == '0' && (b[1]|0x20 == 'x' || b[1]|0x20 == 'f' || b[1]|0x20 == 'd' || b[1]|0x20 == 'b')
}

// validNumber accepts PTX's literals: integers (decimal, octal, 0x hex, 0b
// binary, with an optional U), 0f and 0d hexadecimal floats, and decimal
// floats.
func validNumber(s string) bool {
	all := func(s string, ok func(byte) bool) bool {
		if s == "" {
			return false
		}
		for i := 0; i < len(s); i++ {
			if !ok(s[i]) {
				return false
			}
		}
		return true
	}
	hex := func(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
	bin := func(c byte) bool { return c == '0' || c == '1' }
	if len(s) > 2 && s[0] == '0' {
		switch s[1] | 0x20 {
		case 'x':
			return all(trimU(s[2:]), hex)
		case 'b':
			return all(trimU(s[2:]), bin)
		case 'f':
			return len(s) == 10 && all(s[2:], hex)
		case 'd':
			return len(s) == 18 && all(s[2:], hex)
		}
	}
	if all(trimU(s), isDigit) {
		return true
	}
	// Decimal float: digits [. digits] [e [+-] digits], with a dot or an exponent.
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	seen := false
	if i < len(s) && s[i] == '.' {
		seen = true
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		seen = true
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return seen && i == len(s)
}

func trimU(s string) string {
	if len(s) > 1 && s[len(s)-1] == 'U' {
		return s[:len(s)-1]
	}
	return s
}

// quote gives a token's text for an error message, short and on one line.
func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}
