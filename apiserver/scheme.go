package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// newScheme builds the scheme the server decodes and encodes with:
// servicecatalog.k8s.io/v1beta1, the same types as its internal version,
// and the unversioned meta types every API server serves.
func newScheme() (*runtime.Scheme, serializer.CodecFactory) {
	scheme := runtime.NewScheme()
	must(v1beta1.AddToScheme(scheme))
	must(v1beta1.AddToSchemeAsInternal(scheme))
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{},
		&metav1.APIGroup{}, &metav1.APIResourceList{})
	return scheme, serializer.NewCodecFactory(scheme)
}

func must(err error) {
	if err != nil {
		panic(err) // a programming error in the scheme's registration
	}
}

// withoutProtobuf offers every media type of the codecs but protobuf, and
// decodes request bodies with checkedDecoder: the v1beta1 types have no
// protobuf marshalling, so clients that prefer it (the namespace
// controller, the garbage collector, anything built on client-go's
// metadata client) must be answered in JSON, their fallback, rather than
// fail to encode.
type withoutProtobuf struct{ runtime.NegotiatedSerializer }

func (s withoutProtobuf) SupportedMediaTypes() []runtime.SerializerInfo {
	var out []runtime.SerializerInfo
	for _, info := range s.NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			continue
		}
		// Request bodies are decoded with these (checkedDecoder).
		if info.Serializer != nil {
			info.Serializer = checkedDecoder{info.Serializer}
		}
		if info.StrictSerializer != nil {
			info.StrictSerializer = checkedDecoder{info.StrictSerializer}
		}
		out = append(out, info)
	}
	return out
}
