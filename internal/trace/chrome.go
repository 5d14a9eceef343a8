package trace

import (
	"bufio"
	"io"
	"strconv"
	"unicode/utf8"
)

// chromeSink writes the Chrome trace-event format: one JSON object whose
// traceEvents array holds complete ("X") slices, process and thread
// metadata ("M"), and flows as version-2 flow fields on the slices
// (bind_id with flow_out on a launch call, flow_in on each kernel it ran),
// which Perfetto UI and chrome://tracing both read. Times are µs with ns
// precision, from the start of the timeline.
type chromeSink struct {
	w     *bufio.Writer
	buf   []byte
	first bool
}

func newChromeSink(w io.Writer) *chromeSink {
	s := &chromeSink{w: bufio.NewWriterSize(w, 1<<20), first: true}
	s.w.WriteString(`{"displayTimeUnit":"ns","otherData":{"generator":"gpurr trace"},"traceEvents":[` + "\n")
	return s
}

func (s *chromeSink) event(b []byte) error {
	if s.first {
		s.first = false
		_, err := s.w.Write(b)
		return err
	}
	s.w.WriteString(",\n")
	_, err := s.w.Write(b)
	return err
}

// metadata writes an "M" event naming or ordering a process (tid < 0) or
// thread.
func (s *chromeSink) metadata(name string, pid int, tid int64, key string, value func([]byte) []byte) error {
	b := append(s.buf[:0], `{"ph":"M","name":"`...)
	b = append(b, name...)
	b = append(b, `","pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	if tid >= 0 {
		b = append(b, `,"tid":`...)
		b = strconv.AppendInt(b, tid, 10)
	}
	b = append(b, `,"args":{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b = value(b)
	b = append(b, "}}"...)
	s.buf = b
	return s.event(b)
}

func (s *chromeSink) track(t *track) error {
	p := t.proc
	if !p.declared {
		p.declared = true
		if err := s.metadata("process_name", p.pid, -1, "name", func(b []byte) []byte { return appendJSONString(b, p.name) }); err != nil {
			return err
		}
		if err := s.metadata("process_sort_index", p.pid, -1, "sort_index", func(b []byte) []byte { return strconv.AppendInt(b, int64(p.pid), 10) }); err != nil {
			return err
		}
	}
	if err := s.metadata("thread_name", p.pid, t.tid, "name", func(b []byte) []byte { return appendJSONString(b, t.name) }); err != nil {
		return err
	}
	return s.metadata("thread_sort_index", p.pid, t.tid, "sort_index", func(b []byte) []byte { return strconv.AppendInt(b, int64(t.sort), 10) })
}

func (s *chromeSink) slice(sl *slice) error {
	b := append(s.buf[:0], `{"ph":"X","name":`...)
	b = appendJSONString(b, sl.name)
	b = append(b, `,"cat":"`...)
	b = append(b, sl.cat...)
	b = append(b, `","pid":`...)
	b = strconv.AppendInt(b, int64(sl.track.proc.pid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, sl.track.tid, 10)
	b = append(b, `,"ts":`...)
	b = appendMicros(b, sl.ts)
	b = append(b, `,"dur":`...)
	b = appendMicros(b, sl.dur)
	switch {
	case sl.flowOut != 0:
		b = append(b, `,"bind_id":`...)
		b = strconv.AppendUint(b, sl.flowOut, 10)
		b = append(b, `,"flow_out":true`...)
	case sl.flowIn != 0:
		b = append(b, `,"bind_id":`...)
		b = strconv.AppendUint(b, sl.flowIn, 10)
		b = append(b, `,"flow_in":true`...)
	}
	b = append(b, `,"args":{`...)
	for i, a := range sl.args {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, a.key...)
		b = append(b, `":`...)
		if a.num {
			b = strconv.AppendInt(b, a.n, 10)
		} else {
			b = appendJSONString(b, a.s)
		}
	}
	b = append(b, "}}"...)
	s.buf = b
	return s.event(b)
}

func (s *chromeSink) finish() error {
	s.w.WriteString("\n]}\n")
	return s.w.Flush()
}

// appendMicros writes ns as µs with three decimals, exactly.
func appendMicros(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	frac := ns % 1000
	if frac == 0 {
		return b
	}
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

// appendJSONString writes s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
