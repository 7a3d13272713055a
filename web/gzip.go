package web

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"sync"
)

// deflated is a piece of a page compressed once and sent many times: raw
// DEFLATE blocks (RFC 1951) that are not final and end on a byte boundary
// (a sync flush ends them so), which is what lets such pieces follow each
// other in one stream, compressed apart.
type deflated struct {
	plain []byte
	z     []byte
}

var flaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// deflate compresses p into dst as non-final, byte-aligned blocks.
func deflate(dst *bytes.Buffer, p []byte) {
	w := flaters.Get().(*flate.Writer)
	w.Reset(dst)
	_, _ = w.Write(p)
	_ = w.Flush()
	flaters.Put(w)
}

func newDeflated(p []byte) *deflated {
	var buf bytes.Buffer
	deflate(&buf, p)
	return &deflated{plain: p, z: buf.Bytes()}
}

// gzipHeader is a gzip member's header (RFC 1952 §2.3): no name, no
// time, unknown system.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// finalBlock is an empty final block with fixed Huffman codes: the three
// header bits 1 (final) and 01 (fixed), then the 7-bit end-of-block code 0.
var finalBlock = []byte{0x03, 0x00}

// gzipPage is a page as one gzip member: before, compressed now; the
// piece compressed once; after, compressed now; then the final block and
// the CRC-32 and length of the whole page.
func gzipPage(before []byte, piece *deflated, after []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(piece.z) + len(before)/2 + len(after)/2 + 64)
	buf.Write(gzipHeader)
	deflate(&buf, before)
	buf.Write(piece.z)
	deflate(&buf, after)
	buf.Write(finalBlock)
	crc := crc32.Update(crc32.Update(crc32.ChecksumIEEE(before), crc32.IEEETable, piece.plain), crc32.IEEETable, after)
	size := len(before) + len(piece.plain) + len(after)
	buf.Write(binary.LittleEndian.AppendUint32(nil, crc))
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(size)))
	return buf.Bytes()
}
