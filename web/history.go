package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

type historyKind int

const (
	kindBroker historyKind = iota
	kindInstance
	kindBinding
)

type historyView struct {
	Kind, Name, Back string
	Events           []catalog.Event
}

// history shows an object's events, newest first.
func (s *Server) history(k historyKind) func(echo.Context) error {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		v := historyView{}
		var id string
		switch k {
		case kindBroker:
			b, err := s.broker(c)
			if err != nil {
				return err
			}
			id, v.Kind, v.Name, v.Back = b.ID, "Broker", b.Name, "/brokers"
			if b.Namespace != "" {
				v.Name = b.Namespace + "/" + b.Name
			}
		case kindInstance:
			in, err := s.instance(c, c.Param("id"))
			if err != nil {
				return err
			}
			id, v.Kind, v.Name, v.Back = in.ID, "Instance", in.Namespace+"/"+in.Name, "/instances/"+in.ID
		case kindBinding:
			b, err := s.binding(c, c.Param("id"))
			if err != nil {
				return err
			}
			id, v.Kind, v.Name, v.Back = b.ID, "Binding", b.Namespace+"/"+b.Name, "/bindings/"+b.ID
		}
		events, err := s.store.Events(ctx, id, 0)
		if err != nil {
			return err
		}
		for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
			events[i], events[j] = events[j], events[i]
		}
		v.Events = events
		// The header marks the list the object belongs to.
		nav := map[historyKind]string{kindBroker: "brokers", kindInstance: "instances", kindBinding: "bindings"}[k]
		return s.page(c, http.StatusOK, "history", v.Kind+" "+v.Name+": history", nav, v)
	}
}
