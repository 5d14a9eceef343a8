package chunkstore

import (
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/gpurr/gpurr/recording/memhash"
)

// Codec is how one entry's bytes are stored; each entry records its own, so
// a store can hold entries of several codecs and the default can change
// without a format change.
type Codec uint8

// Codecs known to this version. A reader meeting another value reports the
// entry as unreadable (written by a newer gpurr) and reads the rest.
const (
	CodecRaw  Codec = 0 // the chunk's bytes as they are
	CodecS2   Codec = 1 // one S2 block (github.com/klauspost/compress/s2, Encode)
	CodecZstd Codec = 2 // one zstd frame
)

func (c Codec) String() string { return name(codecNames[:], uint8(c), "codec") }

var codecNames = [...]string{CodecRaw: "raw", CodecS2: "s2", CodecZstd: "zstd"}

// name is names[v], or kind(v) past the end of names.
func name(names []string, v uint8, kind string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// Compression is what the writer tries on each chunk. Whatever it is, a
// chunk it does not make at least 1/8 (12.5%) smaller is stored raw.
type Compression uint8

// Compressions a Writer can use. The zero value is the default, chosen by
// measurement (bench/NOTES.md, "chunk store codec").
const (
	CompressDefault     Compression = iota // CompressS2
	CompressNone                           // store every chunk raw
	CompressS2                             // S2 block, s2.Encode
	CompressZstdFastest                    // zstd, SpeedFastest
	CompressZstdDefault                    // zstd, SpeedDefault
)

func (c Compression) String() string { return name(compressionNames[:], uint8(c), "compression") }

var compressionNames = [...]string{
	CompressDefault:     "default",
	CompressNone:        "none",
	CompressS2:          "s2",
	CompressZstdFastest: "zstd-fastest",
	CompressZstdDefault: "zstd-default",
}

// minSaving decides when compression is worth keeping: the compressed
// bytes are stored only when they are at least raw/minSaving smaller;
// otherwise the chunk is stored raw and its readers skip a decode that would
// save little disk.
const minSaving = 8

// compressor compresses chunks for one worker goroutine; it is not safe for
// concurrent use.
type compressor struct {
	codec Codec
	zstd  *zstd.Encoder
}

func newCompressor(c Compression) (*compressor, error) {
	level := zstd.SpeedFastest
	switch c {
	case CompressDefault, CompressS2:
		return &compressor{codec: CodecS2}, nil
	case CompressNone:
		return &compressor{codec: CodecRaw}, nil
	case CompressZstdFastest:
	case CompressZstdDefault:
		level = zstd.SpeedDefault
	default:
		return nil, fmt.Errorf("chunk store: unknown compression %d", uint8(c))
	}
	// Our own CRC-32C covers the stored bytes, so zstd's checksum would be
	// paid for twice; a chunk is at most 64 KiB, so is the window.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false), zstd.WithWindowSize(memhash.ChunkSize), zstd.WithSingleSegment(true))
	if err != nil {
		return nil, fmt.Errorf("chunk store: zstd encoder: %w", err)
	}
	return &compressor{codec: CodecZstd, zstd: enc}, nil
}

// compress appends to dst the encoding of src (a chunk of at most
// memhash.ChunkSize bytes) and returns it with the codec used, or dst
// unchanged and CodecRaw when compression saves less than 1/minSaving. dst
// grows only when its spare capacity is under
// s2.MaxEncodedLen(memhash.ChunkSize) (about 75 KiB).
func (c *compressor) compress(dst, src []byte) ([]byte, Codec) {
	start := len(dst)
	switch c.codec {
	case CodecS2:
		need := s2.MaxEncodedLen(len(src))
		dst = slices.Grow(dst, need)
		enc := s2.Encode(dst[start:start+need], src) // fits: no allocation
		dst = dst[:start+len(enc)]
	case CodecZstd:
		dst = c.zstd.EncodeAll(src, dst)
	default:
		return dst, CodecRaw
	}
	if len(dst)-start > len(src)-len(src)/minSaving {
		return dst[:start], CodecRaw
	}
	return dst, c.codec
}

// decompressor decodes stored entries; it is safe for concurrent use.
type decompressor struct {
	once sync.Once
	zstd *zstd.Decoder
	err  error
}

// decode returns the rawLen bytes that stored holds in codec: stored itself
// for CodecRaw, else a new slice. Any stored bytes yield the chunk or an
// error.
func (d *decompressor) decode(codec Codec, stored []byte, rawLen int) ([]byte, error) {
	var out []byte
	var err error
	switch codec {
	case CodecRaw:
		out = stored
	case CodecS2:
		n, lenErr := s2.DecodedLen(stored)
		if lenErr != nil {
			return nil, fmt.Errorf("s2: %v", lenErr)
		}
		if n != rawLen {
			return nil, fmt.Errorf("s2 block holds %d bytes, entry says %d", n, rawLen)
		}
		out, err = s2.Decode(make([]byte, rawLen), stored)
	case CodecZstd:
		d.once.Do(func() {
			d.zstd, d.err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.IgnoreChecksum(true),
				zstd.WithDecoderMaxMemory(memhash.ChunkSize), zstd.WithDecodeAllCapLimit(true))
		})
		if d.err != nil {
			return nil, fmt.Errorf("zstd decoder: %v", d.err)
		}
		out, err = d.zstd.DecodeAll(stored, make([]byte, 0, rawLen))
	default:
		return nil, fmt.Errorf("unknown codec %d (written by a newer gpurr?)", uint8(codec))
	}
	if err != nil {
		return nil, fmt.Errorf("%v: %v", codec, err)
	}
	if len(out) != rawLen {
		return nil, fmt.Errorf("%v: decoded %d bytes, entry says %d", codec, len(out), rawLen)
	}
	return out, nil
}

// close releases the zstd decoder's goroutines and memory, if one was made.
func (d *decompressor) close() {
	d.once.Do(func() {})
	if d.zstd != nil {
		d.zstd.Close()
	}
}
