package apiserver

import (
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// The storages' reset fields (k8s.io/apiserver's rest.ResetFieldsStrategy,
// as kube-apiserver's own storages declare them): what a write leaves as
// it was, which a manager's apply or update therefore never owns. A write
// to the main resource keeps the status; one to the status subresource
// keeps the spec and the metadata.
var (
	_ rest.ResetFieldsStrategy = (*instanceStorage)(nil)
	_ rest.ResetFieldsStrategy = (*bindingStorage)(nil)
	_ rest.ResetFieldsStrategy = (*brokerStorage)(nil)
	_ rest.ResetFieldsStrategy = (*statusStorage)(nil)
)

// resetFields is the set of paths reset in v1beta1.
func resetFields(paths ...fieldpath.Path) map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(v1beta1.SchemeGroupVersion.String()): fieldpath.NewSet(paths...),
	}
}

// GetResetFields is the status.
func (s *instanceStorage) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(fieldpath.MakePathOrDie("status"))
}

// GetResetFields is the status.
func (s *bindingStorage) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(fieldpath.MakePathOrDie("status"))
}

// GetResetFields is the status, which only the catalog writes.
func (s *brokerStorage) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(fieldpath.MakePathOrDie("status"))
}

// GetResetFields is the spec and the metadata.
func (s *statusStorage) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata"))
}
