package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

// TestGzipPage: a page made of pieces compressed apart is one valid gzip
// member, read back whole by a standard reader (which checks the CRC-32
// and length).
func TestGzipPage(t *testing.T) {
	for _, tc := range []struct{ before, piece, after string }{
		{"<html><body>", strings.Repeat("<tr><td>plan</td></tr>\n", 5000), "</body></html>"},
		{"", "x", ""},
		{"", "", ""},
		{strings.Repeat("ab", 70000), "", strings.Repeat("c", 3)},
	} {
		z := gzipPage([]byte(tc.before), newDeflated([]byte(tc.piece)), []byte(tc.after))
		zr, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			t.Fatal(err)
		}
		zr.Multistream(false)
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		if string(got) != tc.before+tc.piece+tc.after {
			t.Fatalf("read back %d bytes, want %d", len(got), len(tc.before+tc.piece+tc.after))
		}
	}
}
