// Package svgsafe rewrites an SVG image into one that can do nothing but
// draw: brokers name their services' icons, and an SVG is a document that
// can run script, load other resources and style the page that shows it.
//
// The rewrite keeps an allow-list and drops everything else: the shape,
// gradient and text elements of the SVG namespace; their geometry and
// presentation attributes, with values that refer to nothing outside the
// image (url(#id) only, href="#id" only); CSS in style attributes and
// <style> elements reduced to plain rules of the same properties. No
// script, event handler, foreign object, external reference, entity,
// comment or processing instruction survives. The output is built from
// tokens, so it is well-formed whatever the input was.
package svgsafe

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Limits of what is rewritten: an icon needs far less.
const (
	maxElements = 5000
	maxDepth    = 64
)

const (
	svgNS   = "http://www.w3.org/2000/svg"
	xlinkNS = "http://www.w3.org/1999/xlink"
)

// elements are the SVG elements kept. Those with text keep their text.
var elements = map[string]bool{
	"svg": true, "g": true, "defs": true, "symbol": true, "use": true,
	"path": true, "rect": true, "circle": true, "ellipse": true, "line": true, "polyline": true, "polygon": true,
	"linearGradient": true, "radialGradient": true, "stop": true, "clipPath": true, "mask": true,
	"title": true, "desc": true, "text": true, "tspan": true, "style": true,
}

var textElements = map[string]bool{"title": true, "desc": true, "text": true, "tspan": true, "style": true}

// attributes are the attributes kept, on any kept element; their values
// are checked by safeValue.
var attributes = map[string]bool{
	"id": true, "class": true, "viewBox": true, "preserveAspectRatio": true, "version": true,
	"x": true, "y": true, "x1": true, "y1": true, "x2": true, "y2": true, "cx": true, "cy": true, "r": true,
	"rx": true, "ry": true, "fx": true, "fy": true, "width": true, "height": true, "d": true, "points": true,
	"transform": true, "offset": true, "pathLength": true,
	"gradientUnits": true, "gradientTransform": true, "spreadMethod": true,
	"clipPathUnits": true, "maskUnits": true, "maskContentUnits": true,
	"text-anchor": true, "dominant-baseline": true, "dx": true, "dy": true,
}

// presentation are the presentation attributes, kept as attributes and as
// CSS properties.
var presentation = map[string]bool{
	"fill": true, "fill-opacity": true, "fill-rule": true, "stroke": true, "stroke-width": true,
	"stroke-linecap": true, "stroke-linejoin": true, "stroke-miterlimit": true, "stroke-dasharray": true,
	"stroke-dashoffset": true, "stroke-opacity": true, "opacity": true, "stop-color": true, "stop-opacity": true,
	"clip-path": true, "clip-rule": true, "mask": true, "color": true, "display": true, "visibility": true,
	"font-family": true, "font-size": true, "font-weight": true, "font-style": true, "letter-spacing": true,
	"text-anchor": true, "dominant-baseline": true, "transform": true, "paint-order": true, "isolation": true,
	"mix-blend-mode": true, "vector-effect": true, "shape-rendering": true,
}

// localRef is a value that refers only to an element of the image.
var localRef = regexp.MustCompile(`^#[A-Za-z_][A-Za-z0-9_.:-]*$`)

// urlRef finds the url(...) references of a value.
var urlRef = regexp.MustCompile(`(?i)url\(\s*(['"]?)([^'")]*)(['"]?)\s*\)`)

// safeValue tells whether an attribute or CSS value refers to nothing
// outside the image: its only url() references are to #ids, and it has
// nothing CSS could read as a way out (escapes, at-rules, comments,
// expression(), image-set(), blocks).
func safeValue(v string) bool {
	low := strings.ToLower(v)
	for _, bad := range []string{"\\", "@", "/*", "expression", "image", "javascript:", "{", "}", "<", ";"} {
		if strings.Contains(low, bad) {
			return false
		}
	}
	for _, m := range urlRef.FindAllStringSubmatch(v, -1) {
		if !localRef.MatchString(m[2]) {
			return false
		}
	}
	// url( without a match above: malformed, refused.
	return strings.Count(low, "url(") == len(urlRef.FindAllString(v, -1))
}

// ErrNotSVG is returned for input whose root is not an SVG element.
var ErrNotSVG = errors.New("not an SVG image")

// Clean rewrites an SVG document into its safe subset; see the package
// documentation for what is kept.
func Clean(src []byte) ([]byte, error) {
	d := xml.NewDecoder(bytes.NewReader(src))
	d.Strict = true
	var out bytes.Buffer
	e := xml.NewEncoder(&out)
	c := cleaner{d: d, e: e}
	if err := c.run(); err != nil {
		return nil, err
	}
	if err := e.Flush(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

type cleaner struct {
	d *xml.Decoder
	e *xml.Encoder
	// open are the names of the kept elements open; skip counts the
	// depth inside a dropped element.
	open     []string
	skip     int
	elements int
	root     bool
}

func (c *cleaner) run() error {
	for {
		tok, err := c.d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("svg: %w", err)
		}
		if err := c.token(tok); err != nil {
			return err
		}
	}
	if !c.root {
		return ErrNotSVG
	}
	if len(c.open) > 0 || c.skip > 0 {
		return errors.New("svg: unclosed elements")
	}
	return nil
}

func (c *cleaner) token(tok xml.Token) error {
	switch t := tok.(type) {
	case xml.StartElement:
		return c.start(t)
	case xml.EndElement:
		if c.skip > 0 {
			c.skip--
			return nil
		}
		name := c.open[len(c.open)-1]
		c.open = c.open[:len(c.open)-1]
		return c.e.EncodeToken(xml.EndElement{Name: xml.Name{Local: name}})
	case xml.CharData:
		if c.skip > 0 || len(c.open) == 0 || !textElements[c.open[len(c.open)-1]] {
			return nil
		}
		text := string(t)
		if c.open[len(c.open)-1] == "style" {
			text = cleanCSS(text)
		}
		return c.e.EncodeToken(xml.CharData(text))
	}
	// Comments, processing instructions and directives (DOCTYPE and its
	// entities) are dropped.
	return nil
}

func (c *cleaner) start(t xml.StartElement) error {
	if c.skip > 0 {
		c.skip++
		return nil
	}
	c.elements++
	if c.elements > maxElements || len(c.open) >= maxDepth {
		return errors.New("svg: too many or too deeply nested elements")
	}
	if len(c.open) == 0 {
		if c.root || t.Name.Local != "svg" || (t.Name.Space != svgNS && t.Name.Space != "") {
			return ErrNotSVG
		}
		c.root = true
	}
	if (t.Name.Space != svgNS && t.Name.Space != "") || !elements[t.Name.Local] {
		c.skip = 1
		return nil
	}
	out := xml.StartElement{Name: xml.Name{Local: t.Name.Local}}
	if len(c.open) == 0 {
		out.Attr = append(out.Attr, xml.Attr{Name: xml.Name{Local: "xmlns"}, Value: svgNS})
	}
	out.Attr = append(out.Attr, cleanAttrs(t.Attr)...)
	c.open = append(c.open, t.Name.Local)
	return c.e.EncodeToken(out)
}

// cleanAttrs keeps the allowed attributes with safe values; href (SVG 2,
// or xlink's) only as a reference to an element of the image.
func cleanAttrs(attrs []xml.Attr) []xml.Attr {
	var out []xml.Attr
	for _, a := range attrs {
		name := a.Name.Local
		switch {
		case (name == "href" && (a.Name.Space == "" || a.Name.Space == xlinkNS)):
			if localRef.MatchString(strings.TrimSpace(a.Value)) {
				out = append(out, xml.Attr{Name: xml.Name{Local: "href"}, Value: strings.TrimSpace(a.Value)})
			}
		case a.Name.Space != "":
			// xmlns declarations and foreign attributes.
		case name == "style":
			if css := cleanDeclarations(a.Value); css != "" {
				out = append(out, xml.Attr{Name: a.Name, Value: css})
			}
		case name == "class":
			if classList.MatchString(a.Value) {
				out = append(out, a)
			}
		case (attributes[name] || presentation[name]) && safeValue(a.Value):
			out = append(out, a)
		}
	}
	return out
}

var (
	classList = regexp.MustCompile(`^[A-Za-z0-9_ -]*$`)
	// selector is a plain CSS selector list: names, classes, ids,
	// descendants, commas.
	selector = regexp.MustCompile(`^[A-Za-z0-9_.#,\s>*-]+$`)
)

// cleanDeclarations keeps the declarations of presentation properties
// with safe values.
func cleanDeclarations(s string) string {
	var kept []string
	for decl := range strings.SplitSeq(s, ";") {
		prop, val, ok := strings.Cut(decl, ":")
		prop, val = strings.ToLower(strings.TrimSpace(prop)), strings.TrimSpace(val)
		if !ok || !presentation[prop] || val == "" || !safeValue(val) {
			continue
		}
		kept = append(kept, prop+":"+val)
	}
	return strings.Join(kept, ";")
}

// cleanCSS keeps, of a style sheet, the rules with plain selectors and
// their safe declarations; at-rules and anything else go.
func cleanCSS(s string) string {
	var out strings.Builder
	for rule := range strings.SplitSeq(s, "}") {
		sel, body, ok := strings.Cut(rule, "{")
		// A statement at-rule (@import ...;) before the selector goes.
		if i := strings.LastIndex(sel, ";"); i >= 0 {
			sel = sel[i+1:]
		}
		sel = strings.TrimSpace(sel)
		if !ok || !selector.MatchString(sel) {
			continue
		}
		if decls := cleanDeclarations(body); decls != "" {
			out.WriteString(sel + "{" + decls + "}")
		}
	}
	return out.String()
}
