package restapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// objectRequest is the body of POST /instances and POST /bindings.
type objectRequest[S any] struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        S                 `json:"spec"`
}

func (s *Server) createInstance(c echo.Context) error {
	var req objectRequest[catalog.InstanceSpec]
	if err := decode(c, &req); err != nil {
		return err
	}
	in := &catalog.Instance{Spec: req.Spec}
	// Who asks is the server's to say, not the request's.
	in.Spec.UserInfo = nil
	in.Name, in.Namespace, in.Labels, in.Annotations = req.Name, req.Namespace, req.Labels, req.Annotations
	if err := allowNamespace(c, in.Namespace); err != nil {
		return err
	}
	in, err := s.store.CreateInstance(ctx(c), in)
	if err != nil {
		return err
	}
	return s.sendInstance(c, http.StatusCreated, in)
}

func (s *Server) listInstances(c echo.Context) error {
	opts, err := listOptions(c)
	if err != nil {
		return err
	}
	if err := scopeList(c, &opts); err != nil {
		return err
	}
	l, err := s.store.ListInstances(ctx(c), opts)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (s *Server) getInstance(c echo.Context) error {
	in, err := s.instance(c)
	if err != nil {
		return err
	}
	return s.sendInstance(c, http.StatusOK, in)
}

// updateInstance applies a JSON merge patch (RFC 7386) to the instance's
// labels, annotations and spec: parameters, plan, updateRequests.
func (s *Server) updateInstance(c echo.Context) error {
	patch, err := readPatch(c)
	if err != nil {
		return err
	}
	found, err := s.instance(c)
	if err != nil {
		return err
	}
	in, err := s.store.UpdateInstance(ctx(c), found.ID, 0, func(in *catalog.Instance) error {
		before := objectRequest[catalog.InstanceSpec]{Name: in.Name, Namespace: in.Namespace, Labels: in.Labels, Annotations: in.Annotations, Spec: in.Spec}
		var after objectRequest[catalog.InstanceSpec]
		if err := mergeInto(before, patch, &after); err != nil {
			return err
		}
		after.Spec.UserInfo = in.Spec.UserInfo
		in.Name, in.Namespace = after.Name, after.Namespace
		in.Labels, in.Annotations, in.Spec = after.Labels, after.Annotations, after.Spec
		return nil
	})
	if err != nil {
		return err
	}
	return s.sendInstance(c, http.StatusOK, in)
}

// deleteInstance marks the instance for deletion: 202, the engine
// deprovisions it.
func (s *Server) deleteInstance(c echo.Context) error {
	found, err := s.instance(c)
	if err != nil {
		return err
	}
	in, err := s.store.DeleteInstance(ctx(c), found.ID)
	if err != nil {
		return err
	}
	return s.sendInstance(c, http.StatusAccepted, in)
}

func (s *Server) instanceEvents(c echo.Context) error {
	in, err := s.instance(c)
	if err != nil {
		return err
	}
	return s.events(c, in.ID)
}

func (s *Server) createBinding(c echo.Context) error {
	var req objectRequest[catalog.BindingSpec]
	if err := decode(c, &req); err != nil {
		return err
	}
	b := &catalog.Binding{Spec: req.Spec}
	b.Spec.UserInfo = nil
	b.Name, b.Namespace, b.Labels, b.Annotations = req.Name, req.Namespace, req.Labels, req.Annotations
	if err := allowNamespace(c, b.Namespace); err != nil {
		return err
	}
	b, err := s.store.CreateBinding(ctx(c), b)
	if err != nil {
		return err
	}
	return s.sendBinding(c, http.StatusCreated, b)
}

func (s *Server) listBindings(c echo.Context) error {
	opts, err := listOptions(c)
	if err != nil {
		return err
	}
	if err := scopeList(c, &opts); err != nil {
		return err
	}
	l, err := s.store.ListBindings(ctx(c), opts)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (s *Server) getBinding(c echo.Context) error {
	b, err := s.binding(c)
	if err != nil {
		return err
	}
	return s.sendBinding(c, http.StatusOK, b)
}

func (s *Server) deleteBinding(c echo.Context) error {
	found, err := s.binding(c)
	if err != nil {
		return err
	}
	b, err := s.store.DeleteBinding(ctx(c), found.ID)
	if err != nil {
		return err
	}
	return s.sendBinding(c, http.StatusAccepted, b)
}

// credentials returns the binding's decrypted credentials.
func (s *Server) credentials(c echo.Context) error {
	b, err := s.binding(c)
	if err != nil {
		return err
	}
	creds, err := s.store.Credentials(ctx(c), b.ID)
	if err == catalog.ErrNoCredentials {
		return apiError(http.StatusConflict, "not_ready", "The binding has no credentials yet: wait until it is Ready.")
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, creds)
}

func (s *Server) bindingEvents(c echo.Context) error {
	b, err := s.binding(c)
	if err != nil {
		return err
	}
	return s.events(c, b.ID)
}

// listNamespaces lists the namespaces that hold instances, bindings or
// brokers, those of the token's namespaces only for a limited token.
func (s *Server) listNamespaces(c echo.Context) error {
	var items []string
	var err error
	if t := tokenOf(c); t != nil && !t.AllNamespaces() {
		items, err = s.store.NamespacesAmong(ctx(c), t.Namespaces)
	} else {
		items, err = s.store.Namespaces(ctx(c), 1000)
	}
	if err != nil {
		return err
	}
	if items == nil {
		items = []string{}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}
