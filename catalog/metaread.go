package catalog

import (
	"bytes"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// metaReader decodes the metadata column's documents (metaDoc) of a
// read's rows; one object's is decoded by json.Unmarshal. A string that
// repeats from row to row (a label's key, most of their values, a
// finalizer) is kept once: a page of 500 instances spent a sixth of its
// time decoding metadata, most of it allocating the same strings again.
type metaReader struct {
	buf  bytes.Buffer
	dec  jsontext.Decoder
	seen map[string]string
}

// newMetaReader is a reader for the documents of a read's rows.
func newMetaReader() *metaReader { return &metaReader{seen: map[string]string{}} }

// maxSeen bounds the strings a metaReader keeps.
const maxSeen = 4096

// decode sets m's labels, annotations, finalizers and extra from the
// document raw, as json.Unmarshal of a metaDoc does.
func (r *metaReader) decode(raw []byte, m *Meta) error {
	r.buf.Reset()
	r.buf.Write(raw)
	r.dec.Reset(&r.buf)
	if null, err := r.null(); null || err != nil {
		if err != nil {
			return err
		}
		return r.end()
	}
	if err := r.open('{'); err != nil {
		return err
	}
	for r.dec.PeekKind() != '}' {
		name, err := r.str()
		if err != nil {
			return err
		}
		switch name {
		case "labels":
			m.Labels, err = r.stringMap()
		case "annotations":
			m.Annotations, err = r.stringMap()
		case "finalizers":
			m.Finalizers, err = r.stringList()
		case "extra":
			var v jsontext.Value
			if v, err = r.dec.ReadValue(); err == nil {
				m.Extra = bytes.Clone(v)
			}
		default:
			err = r.dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return err
	}
	return r.end()
}

// end checks that nothing follows the document.
func (r *metaReader) end() error {
	if _, err := r.dec.ReadValue(); err != io.EOF {
		return fmt.Errorf("metadata: more after the document (%v)", err)
	}
	return nil
}

// null reads a null, if one comes next.
func (r *metaReader) null() (bool, error) {
	if r.dec.PeekKind() != 'n' {
		return false, nil
	}
	_, err := r.dec.ReadToken()
	return true, err
}

// open reads the beginning of an object or array (kind '{' or '[').
func (r *metaReader) open(kind jsontext.Kind) error {
	tok, err := r.dec.ReadToken()
	if err == nil && tok.Kind() != kind {
		err = fmt.Errorf("metadata: %v where %v is expected", tok.Kind(), kind)
	}
	return err
}

// stringMap reads an object of strings, nil for null.
func (r *metaReader) stringMap() (map[string]string, error) {
	if null, err := r.null(); null || err != nil {
		return nil, err
	}
	if err := r.open('{'); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for r.dec.PeekKind() != '}' {
		k, err := r.str()
		if err != nil {
			return nil, err
		}
		if out[k], err = r.str(); err != nil {
			return nil, err
		}
	}
	_, err := r.dec.ReadToken()
	return out, err
}

// stringList reads an array of strings, nil for null.
func (r *metaReader) stringList() ([]string, error) {
	if null, err := r.null(); null || err != nil {
		return nil, err
	}
	if err := r.open('['); err != nil {
		return nil, err
	}
	out := []string{}
	for r.dec.PeekKind() != ']' {
		s, err := r.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	_, err := r.dec.ReadToken()
	return out, err
}

// str reads a string, kept once when it holds no escape.
func (r *metaReader) str() (string, error) {
	v, err := r.dec.ReadValue()
	if err != nil {
		return "", err
	}
	if v.Kind() != '"' {
		return "", fmt.Errorf("metadata: %v where a string is expected", v.Kind())
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		u, err := jsontext.AppendUnquote(nil, v)
		return string(u), err
	}
	if s, ok := r.seen[string(inner)]; ok {
		return s, nil
	}
	s := string(inner)
	if len(r.seen) < maxSeen {
		r.seen[s] = s
	}
	return s, nil
}
