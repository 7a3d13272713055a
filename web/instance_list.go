package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

type instanceListView struct {
	Instances []*catalog.Instance
	// Names are the instances' services and plans, by instance id.
	Names map[string]offeringName
	Pager pager
	// Quota is the quota panel of the namespace listed, if one is.
	Quota *quotaPanel
}

// instanceListData reads the page of instances the request asks for,
// among those the session may see.
func (s *Server) instanceListData(c echo.Context) (instanceListView, error) {
	q, err := readListQuery(c)
	if err != nil {
		return instanceListView{}, err
	}
	l, err := s.store.ListInstances(c.Request().Context(), q.options(c))
	if err != nil {
		return instanceListView{}, err
	}
	names, err := s.offeringNames(c, l.Items)
	if err != nil {
		return instanceListView{}, err
	}
	return instanceListView{Instances: l.Items, Names: names, Pager: newPager(c, q, "/instances", "/live/instances", l.Continue)}, nil
}

func (s *Server) instanceList(c echo.Context) error {
	v, err := s.instanceListData(c)
	if err != nil {
		return err
	}
	if ns := panelNamespace(c, v.Pager.Namespace); ns != "" && allowsNamespace(c, ns) {
		if v.Quota, err = s.quotaPanelOf(c, ns); err != nil {
			return err
		}
	}
	return s.page(c, http.StatusOK, "instances", "Instances", "instances", v)
}
