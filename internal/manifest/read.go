package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gpurr/gpurr/recording"
)

// Span is where a launch's line lies in the manifest file, to read it
// again with ReadLaunchAt.
type Span struct {
	Offset int64
	Len    uint32
}

// Reader streams a manifest: its header, then each process and its
// launches, holding one launch at a time. Any bytes yield the manifest or
// an error of one line; after an error the Reader is done.
type Reader struct {
	Header Header
	dec    *json.Decoder
	proc   *Process
	inside bool // between a process's "launches":[ and its ]
	done   bool // after the processes' ]
	seq    uint64
	kernel map[uint64]bool
	stream int // streams seen so far in this process
}

// NewReader reads the manifest's header, up to its first process.
func NewReader(r io.Reader) (*Reader, error) {
	mr := &Reader{dec: json.NewDecoder(r)}
	if err := mr.readHeader(); err != nil {
		return nil, mr.fail(err)
	}
	return mr, nil
}

func (r *Reader) fail(err error) error {
	r.done = true
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("manifest: byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		return fmt.Errorf("manifest: byte %d: %s is %s, want %s", te.Offset, fieldName(te), te.Value, te.Type)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("manifest: ends at byte %d before the document does (cut short?)", r.dec.InputOffset())
	}
	return fmt.Errorf("manifest: %v", err)
}

func fieldName(te *json.UnmarshalTypeError) string {
	if te.Field != "" {
		return fmt.Sprintf("%q", te.Field)
	}
	return "a value"
}

// delim reads the next token and wants it to be d.
func (r *Reader) delim(d json.Delim, what string) error {
	t, err := r.dec.Token()
	if err != nil {
		return err
	}
	if t != d {
		return fmt.Errorf("byte %d: want %s, found %s", r.dec.InputOffset(), what, tokenText(t))
	}
	return nil
}

func tokenText(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("the string %.40q", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", t)
}

// key reads an object's next key, or "" at its end (which it consumes).
func (r *Reader) key() (string, error) {
	if !r.dec.More() {
		return "", r.delim('}', "the end of an object")
	}
	t, err := r.dec.Token()
	if err != nil {
		return "", err
	}
	k, ok := t.(string)
	if !ok {
		return "", fmt.Errorf("byte %d: want a key, found %s", r.dec.InputOffset(), tokenText(t))
	}
	if k == "" {
		return "", fmt.Errorf("byte %d: empty key", r.dec.InputOffset())
	}
	return k, nil
}

// skip reads a value it does not know (a field added within version 1).
func (r *Reader) skip() error {
	var raw json.RawMessage
	return r.dec.Decode(&raw)
}

func (r *Reader) readHeader() error {
	t, err := r.dec.Token()
	if err != nil || t != json.Delim('{') {
		return errors.New("not a gpurr manifest (not a JSON object; gpurr manifest REC -o FILE writes one)")
	}
	h := &r.Header
	for {
		k, err := r.key()
		if err != nil {
			return err
		}
		switch k {
		case "":
			if h.Format != Format {
				return fmt.Errorf("not a gpurr manifest (no \"format\": %q; gpurr manifest REC -o FILE writes one)", Format)
			}
			return errors.New("holds no processes")
		case "format":
			err = r.dec.Decode(&h.Format)
		case "version":
			err = r.dec.Decode(&h.Version)
		case "hash":
			err = r.dec.Decode(&h.Hash)
		case "recording":
			err = r.dec.Decode(&h.Recording)
		case "processes":
			if h.Format != Format {
				return fmt.Errorf("not a gpurr manifest (format %.40q, want %q before its processes)", h.Format, Format)
			}
			if h.Version != Version {
				return fmt.Errorf("version %d; this gpurr reads version %d manifests (make it again with this gpurr's manifest verb)", h.Version, Version)
			}
			if h.Hash != Hash {
				return fmt.Errorf("hash %.40q; this gpurr compares %s hashes", h.Hash, Hash)
			}
			return r.delim('[', `the processes' [`)
		default:
			err = r.skip()
		}
		if err != nil {
			return err
		}
	}
}

// NextProcess reads up to the next process's launches and returns the
// process; io.EOF after the last one. The launches of the previous process
// must have been read to their end.
func (r *Reader) NextProcess() (*Process, error) {
	if r.done {
		return nil, io.EOF
	}
	if r.inside {
		return nil, r.fail(errors.New("NextProcess before the previous process's launches were read"))
	}
	p, err := r.readProcess()
	if err != nil {
		if err == io.EOF {
			r.done = true
			return nil, io.EOF
		}
		return nil, r.fail(err)
	}
	return p, nil
}

func (r *Reader) readProcess() (*Process, error) {
	if !r.dec.More() {
		if err := r.delim(']', `the processes' ]`); err != nil {
			return nil, err
		}
		for { // keys after the processes: added within version 1
			k, err := r.key()
			if err != nil {
				return nil, err
			}
			if k == "" {
				break
			}
			if err := r.skip(); err != nil {
				return nil, err
			}
		}
		if _, err := r.dec.Token(); err != io.EOF {
			return nil, fmt.Errorf("byte %d: more after the manifest's end", r.dec.InputOffset())
		}
		return nil, io.EOF
	}
	if err := r.delim('{', "a process"); err != nil {
		return nil, err
	}
	p := &Process{}
	r.proc, r.seq, r.stream, r.kernel = p, 0, 0, map[uint64]bool{}
	for {
		k, err := r.key()
		if err != nil {
			return nil, err
		}
		switch k {
		case "":
			return p, p.check(r.kernel) // no launches
		case "process":
			err = r.dec.Decode(&p.Name)
		case "rank":
			err = r.dec.Decode(&p.Rank)
		case "argv":
			err = r.dec.Decode(&p.Argv)
		case "memory":
			err = r.dec.Decode(&p.Memory)
		case "chunk_bytes":
			err = r.dec.Decode(&p.ChunkBytes)
		case "complete":
			err = r.dec.Decode(&p.Complete)
		case "write_sets":
			err = r.dec.Decode(&p.WriteSets)
		case "stream_units":
			err = r.dec.Decode(&p.StreamUnits)
		case "kernels":
			err = r.dec.Decode(&p.Kernels)
		case "launches":
			if err := p.check(r.kernel); err != nil {
				return nil, err
			}
			r.inside = true
			return p, r.delim('[', `the launches' [`)
		default:
			err = r.skip()
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *Process) check(kernels map[uint64]bool) error {
	if p.Name == "" {
		return errors.New(`a process has no "process" name`)
	}
	if p.Memory != recording.MemoryHash && p.Memory != recording.MemorySnapshot {
		return fmt.Errorf("process %s: memory %.40q, want hash or snapshot", p.Name, p.Memory)
	}
	if p.ChunkBytes == 0 {
		return fmt.Errorf("process %s: no chunk_bytes", p.Name)
	}
	seen := make([]bool, len(p.StreamUnits))
	for k, u := range p.StreamUnits {
		if u < 0 || u >= len(seen) || seen[u] {
			return fmt.Errorf("process %s: stream_units[%d] is %d: want each of 0..%d once", p.Name, k, u, len(seen)-1)
		}
		seen[u] = true
	}
	for _, k := range p.Kernels {
		id, err := parseIdentity(k.Identity)
		if err != nil {
			return fmt.Errorf("process %s: kernel %v", p.Name, err)
		}
		kernels[id] = true
	}
	return nil
}

// NextLaunch returns the current process's next launch and where its line
// lies; io.EOF after its last launch. Launches come in ascending seq, each
// stream numbered at its first use, each kernel listed in the process's
// kernels.
func (r *Reader) NextLaunch() (*Launch, Span, error) {
	if r.done || !r.inside {
		return nil, Span{}, io.EOF
	}
	l, span, err := r.readLaunch()
	if err != nil {
		if err == io.EOF {
			r.inside = false
			return nil, Span{}, io.EOF
		}
		return nil, Span{}, r.fail(err)
	}
	return l, span, nil
}

func (r *Reader) readLaunch() (*Launch, Span, error) {
	if !r.dec.More() {
		if err := r.delim(']', `the launches' ]`); err != nil {
			return nil, Span{}, err
		}
		if k, err := r.key(); err != nil || k != "" {
			if err == nil {
				err = fmt.Errorf("process %s: %q after its launches (launches must be a process's last key)", r.proc.Name, k)
			}
			return nil, Span{}, err
		}
		return nil, Span{}, io.EOF
	}
	start := r.dec.InputOffset()
	l := &Launch{}
	if err := r.dec.Decode(l); err != nil {
		return nil, Span{}, err
	}
	end := r.dec.InputOffset()
	if end-start > math.MaxUint32 {
		return nil, Span{}, fmt.Errorf("process %s: launch %d: a line of %d bytes", r.proc.Name, l.Seq, end-start)
	}
	if err := l.check(); err != nil {
		return nil, Span{}, fmt.Errorf("process %s: %v", r.proc.Name, err)
	}
	switch {
	case l.Seq <= r.seq:
		return nil, Span{}, fmt.Errorf("process %s: launch %d after launch %d (want ascending seq)", r.proc.Name, l.Seq, r.seq)
	case l.Stream > r.stream:
		return nil, Span{}, fmt.Errorf("process %s: launch %d: stream %d before stream %d (streams are numbered in order of first use)", r.proc.Name, l.Seq, l.Stream, r.stream)
	case r.proc.StreamUnits != nil && l.Stream >= len(r.proc.StreamUnits):
		return nil, Span{}, fmt.Errorf("process %s: launch %d: stream %d, but stream_units names %d streams", r.proc.Name, l.Seq, l.Stream, len(r.proc.StreamUnits))
	case !r.kernel[l.ID()]:
		return nil, Span{}, fmt.Errorf("process %s: launch %d: kernel %s is not in the process's kernels", r.proc.Name, l.Seq, l.Identity)
	}
	if l.Stream == r.stream {
		r.stream++
	}
	r.seq = l.Seq
	return l, Span{Offset: start, Len: uint32(end - start)}, nil
}

// ReadLaunchAt reads again the launch whose line lies at s, as NextLaunch
// returned it.
func ReadLaunchAt(f io.ReaderAt, s Span) (*Launch, error) {
	buf := make([]byte, s.Len)
	if _, err := f.ReadAt(buf, s.Offset); err != nil {
		return nil, fmt.Errorf("manifest: byte %d: %v (changed since it was read?)", s.Offset, err)
	}
	l := &Launch{}
	if err := json.Unmarshal(bytes.TrimLeft(buf, ", \t\r\n"), l); err != nil {
		return nil, fmt.Errorf("manifest: byte %d: %v (changed since it was read?)", s.Offset, err)
	}
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("manifest: %v", err)
	}
	return l, nil
}
