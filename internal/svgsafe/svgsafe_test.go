package svgsafe

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{{
		name: "shapes and gradients stay",
		in: `<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><defs><linearGradient id="g"><stop offset="0" stop-color="#fff"/></linearGradient></defs>` +
			`<path d="M0 0L24 24" fill="url(#g)" stroke="#000"/></svg>`,
		want: `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><defs><linearGradient id="g"><stop offset="0" stop-color="#fff"></stop></linearGradient></defs>` +
			`<path d="M0 0L24 24" fill="url(#g)" stroke="#000"></path></svg>`,
	}, {
		name: "script, handlers and foreign objects go",
		in: `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script><circle r="1" onclick="x()"/>` +
			`<foreignObject><div xmlns="http://www.w3.org/1999/xhtml">hi</div></foreignObject></svg>`,
		want: `<svg xmlns="http://www.w3.org/2000/svg"><circle r="1"></circle></svg>`,
	}, {
		name: "references outside the image go",
		in: `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"><use xlink:href="#a"/><use href="https://evil.example/x.svg#a"/>` +
			`<rect fill="url(https://evil.example/p)" width="1"/><a href="javascript:alert(1)"><rect width="2"/></a><image href="https://evil.example/t.png"/></svg>`,
		want: `<svg xmlns="http://www.w3.org/2000/svg"><use href="#a"></use><use></use><rect width="1"></rect></svg>`,
	}, {
		name: "styles keep plain presentation only",
		in: `<svg xmlns="http://www.w3.org/2000/svg"><style>@import url(https://evil.example/a.css); .a{fill:#f00;background:url(https://evil.example/b)} .b{fill:url(#g);stroke:red}</style>` +
			`<rect class="a" style="fill:blue;background-image:url(https://evil.example/c);stroke:url(x)" width="1"/></svg>`,
		want: `<svg xmlns="http://www.w3.org/2000/svg"><style>.a{fill:#f00}.b{fill:url(#g);stroke:red}</style><rect class="a" style="fill:blue" width="1"></rect></svg>`,
	}, {
		name: "editor metadata and comments go, text is escaped",
		in: `<svg xmlns="http://www.w3.org/2000/svg" xmlns:inkscape="http://www.inkscape.org/namespaces/inkscape" inkscape:version="1">` +
			`<!-- a comment --><inkscape:grid/><text x="1">a &lt;b&gt; &amp; c</text></svg>`,
		want: `<svg xmlns="http://www.w3.org/2000/svg"><text x="1">a &lt;b&gt; &amp; c</text></svg>`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Clean([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestCleanRefuses(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("<g>", maxDepth+1) + strings.Repeat("</g>", maxDepth+1)
	for name, in := range map[string]string{
		"html":          `<html><body>hi</body></html>`,
		"not xml":       `\x89PNG`,
		"entities":      `<!DOCTYPE svg [<!ENTITY x "boom">]><svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>`,
		"unclosed":      `<svg xmlns="http://www.w3.org/2000/svg"><g>`,
		"too deep":      `<svg xmlns="http://www.w3.org/2000/svg">` + deep + `</svg>`,
		"two roots":     `<svg xmlns="http://www.w3.org/2000/svg"></svg><svg xmlns="http://www.w3.org/2000/svg"></svg>`,
		"other element": `<math xmlns="http://www.w3.org/1998/Math/MathML"></math>`,
	} {
		if out, err := Clean([]byte(in)); err == nil {
			t.Errorf("%s: accepted as %s", name, out)
		}
	}
	if _, err := Clean([]byte(`<p/>`)); !errors.Is(err, ErrNotSVG) {
		t.Errorf("a <p> root: %v", err)
	}
}

// FuzzClean: whatever the input, the output is well-formed XML with no
// way out of the image, and cleaning it again changes nothing.
func FuzzClean(f *testing.F) {
	f.Add([]byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="x"><script>y</script><use href="#a"/><style>.a{fill:red}</style></svg>`))
	f.Add([]byte(`<svg><rect style="fill:url(#a);stroke:url( 'http://x' )"/><text>&lt;</text></svg>`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Clean(in)
		if err != nil {
			return
		}
		again, err := Clean(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not stable: %q -> %q (%v)", out, again, err)
		}
		d := xml.NewDecoder(bytes.NewReader(out))
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("output %q does not parse: %v", out, err)
			}
			st, ok := tok.(xml.StartElement)
			if !ok {
				continue
			}
			if !elements[st.Name.Local] || st.Name.Local == "script" {
				t.Fatalf("element %s kept", st.Name.Local)
			}
			for _, a := range st.Attr {
				low := strings.ToLower(a.Value)
				if strings.HasPrefix(a.Name.Local, "on") || (a.Name.Local == "href" && !strings.HasPrefix(a.Value, "#")) ||
					strings.Contains(low, "javascript:") || strings.Contains(low, "url(http") {
					t.Fatalf("attribute %s=%q kept", a.Name.Local, a.Value)
				}
			}
		}
	})
}
