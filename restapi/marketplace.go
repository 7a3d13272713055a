package restapi

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// marketplacePageBytes bounds a page of classes or plans in bytes as well
// as in objects (limit): a broker's catalogue can be 32 MiB, mostly schemas
// and metadata, and a page of it is read and written in memory.
const marketplacePageBytes = 1 << 20

func (s *Server) listClasses(c echo.Context) error {
	opts, err := listOptions(c)
	if err != nil {
		return err
	}
	opts.MaxBytes = marketplacePageBytes
	if err := scopeCatalog(c, &opts); err != nil {
		return err
	}
	removed, err := boolParam(c, "includeRemoved")
	if err != nil {
		return err
	}
	l, err := s.store.ListClassesRaw(ctx(c), catalog.ClassFilter{
		Broker: c.QueryParam("broker"), Name: c.QueryParam("name"), Tag: c.QueryParam("tag"),
		IncludeRemoved: removed != nil && *removed,
	}, opts)
	if err != nil {
		return err
	}
	return writeRawList(c, l)
}

func (s *Server) getClass(c echo.Context) error {
	class, err := s.class(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, class)
}

func (s *Server) listPlans(c echo.Context) error {
	opts, err := listOptions(c)
	if err != nil {
		return err
	}
	opts.MaxBytes = marketplacePageBytes
	if err := scopeCatalog(c, &opts); err != nil {
		return err
	}
	free, err := boolParam(c, "free")
	if err != nil {
		return err
	}
	removed, err := boolParam(c, "includeRemoved")
	if err != nil {
		return err
	}
	// A plan hidden from the namespaces asked for (or the token's) is
	// left out, as if no broker offered it.
	visible, err := visibleIn(c)
	if err != nil {
		return err
	}
	l, err := s.store.ListPlansRaw(ctx(c), catalog.PlanFilter{
		Broker: c.QueryParam("broker"), Class: c.QueryParam("class"), Name: c.QueryParam("name"),
		Free: free, IncludeRemoved: removed != nil && *removed, VisibleIn: visible,
	}, opts)
	if err != nil {
		return err
	}
	for _, p := range l.Items {
		narrowVisibility(c, &p.Meta)
	}
	return writeRawList(c, l)
}

func (s *Server) getPlan(c echo.Context) error {
	p, err := s.plan(c)
	if err != nil {
		return err
	}
	narrowVisibility(c, &p.Meta)
	return c.JSON(http.StatusOK, p)
}

// planSchemas returns a plan's parameter schemas, as the broker gave them.
func (s *Server) planSchemas(c echo.Context) error {
	p, err := s.plan(c)
	if err != nil {
		return err
	}
	out := map[string]json.RawMessage{}
	if len(p.Spec.InstanceCreateParameterSchema) > 0 {
		out["instanceCreate"] = p.Spec.InstanceCreateParameterSchema
	}
	if len(p.Spec.InstanceUpdateParameterSchema) > 0 {
		out["instanceUpdate"] = p.Spec.InstanceUpdateParameterSchema
	}
	if len(p.Spec.ServiceBindingCreateParameterSchema) > 0 {
		out["bindingCreate"] = p.Spec.ServiceBindingCreateParameterSchema
	}
	return c.JSON(http.StatusOK, out)
}

// writeRawList writes a list whose items' spec and status are already
// JSON, without encoding them again.
func writeRawList(c echo.Context, l catalog.List[*catalog.RawObject]) error {
	buf := make([]byte, 0, 64+len(l.Items)*1024)
	buf = append(buf, `{"items":[`...)
	for i, o := range l.Items {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = o.AppendJSON(buf); err != nil {
			return err
		}
	}
	buf = append(buf, ']')
	if l.Continue != "" {
		cont, _ := json.Marshal(l.Continue)
		buf = append(buf, `,"continue":`...)
		buf = append(buf, cont...)
	}
	buf = append(buf, '}')
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, buf)
}
