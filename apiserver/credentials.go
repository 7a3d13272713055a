package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	webhooktoken "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/bindingdata"
)

// DefaultCredentialsAudience is the audience of the service-account tokens
// the credentials subresource accepts besides the cluster's own: the one
// the CSIDriver csi.bindery.dev asks the kubelet for (tokenRequests), so a
// Pod's token for Bindery opens nothing at kube-apiserver, and a token for
// kube-apiserver is not what the node agent is handed.
const DefaultCredentialsAudience = "bindery.dev"

// credentialsStorage is servicebindings/credentials: a binding's
// credentials shaped as its Secret holds them (package bindingdata), read
// from the catalog by this server, for callers that RBAC lets get the
// subresource. Nothing is written.
type credentialsStorage struct {
	store *catalog.Store
}

var (
	_ rest.Getter  = (*credentialsStorage)(nil)
	_ rest.Storage = (*credentialsStorage)(nil)
)

// New returns an empty ServiceBindingCredentials.
func (s *credentialsStorage) New() runtime.Object { return &v1beta1.ServiceBindingCredentials{} }

// Destroy has nothing to release: the store belongs to the server.
func (s *credentialsStorage) Destroy() {}

// Get reads a binding's credentials.
func (s *credentialsStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	gr, gk := v1beta1.Resource("servicebindings"), v1beta1.Kind("ServiceBinding")
	ns := genericapirequest.NamespaceValue(ctx)
	b, err := s.store.GetBindingByName(ctx, ns, name)
	if err != nil {
		return nil, apiError(err, gr, gk, name, false)
	}
	creds, err := s.store.Credentials(ctx, b.ID)
	if errors.Is(err, catalog.ErrNoCredentials) || (err == nil && !boundReady(b)) {
		return nil, notReady(gr, name)
	}
	if errors.Is(err, catalog.ErrNoKeys) {
		st := apierrors.NewServiceUnavailable("this API server has no encryption keys (--encryption-key, BINDERY_ENCRYPTION_KEY): it cannot open credentials")
		st.ErrStatus.Details = &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name}
		return nil, st
	}
	if err != nil {
		return nil, apiError(err, gr, gk, name, false)
	}
	in, err := s.store.InstanceOf(ctx, b)
	if err != nil {
		return nil, apiError(err, gr, gk, name, false)
	}
	class, err := s.classOf(ctx, in)
	if err != nil {
		return nil, apiError(err, gr, gk, name, false)
	}
	data, err := bindingdata.Data(creds, b.Spec.SecretTransforms, func(secret string) (map[string][]byte, error) {
		return nil, fmt.Errorf("the credentials subresource reads no Secret; mount Secret %q as a volume of its own", secret)
	})
	if err != nil {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
			Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name},
			Message: fmt.Sprintf("%s %q: %v", gk.Kind, name, err),
		}}
	}
	successor, err := s.successor(ctx, b, in)
	if err != nil {
		return nil, apiError(err, gr, gk, name, false)
	}
	return &v1beta1.ServiceBindingCredentials{
		ObjectMeta: metav1.ObjectMeta{
			Name: b.Name, Namespace: b.Namespace, UID: types.UID(b.ID),
			ResourceVersion:   strconv.FormatInt(b.ResourceVersion, 10),
			CreationTimestamp: metav1.NewTime(b.CreationTimestamp),
		},
		Data:      bindingdata.WithTypeProvider(data, class, class.Spec.BrokerName()),
		Successor: successor,
	}, nil
}

// boundReady says whether the credentials stored for a binding are those
// of its current spec: Ready for its generation, not being unbound.
func boundReady(b *catalog.Binding) bool {
	c, ok := catalog.FindCondition(b.Status.Conditions, catalog.ConditionReady)
	return ok && c.Status == catalog.ConditionTrue && b.Status.ReconciledGeneration == b.Generation && b.DeletionTimestamp == nil
}

// notReady is the answer for a binding without credentials yet: 409, as
// the REST API's credentials route answers, so a caller retries.
func notReady(gr schema.GroupResource, name string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Group: gr.Group, Kind: "ServiceBinding", Name: name, RetryAfterSeconds: 5},
		Message: fmt.Sprintf("%s %q has no credentials to give yet: it is not Ready (or is being deleted)", gr.String(), name),
	}}
}

// classOf reads the class of the binding's instance in, for the
// servicebinding.io type and provider.
func (s *credentialsStorage) classOf(ctx context.Context, in *catalog.Instance) (*catalog.ServiceClass, error) {
	ref, _, ns := in.Refs()
	if ref == nil {
		return nil, fmt.Errorf("%w: the instance of the binding has no resolved class", catalog.ErrConflict)
	}
	return s.store.GetClassIn(ctx, ns, ref.Name)
}

// successor is the newest binding, Ready and not being deleted, that
// rotates b (OSB 2.17: its predecessorBindingRef names b); "" if none.
// Rotations are bindings of the same instance, which are few.
func (s *credentialsStorage) successor(ctx context.Context, b *catalog.Binding, in *catalog.Instance) (string, error) {
	all, err := s.store.BindingsOf(ctx, in.ID)
	if err != nil {
		return "", err
	}
	var next *catalog.Binding
	for _, o := range all {
		ref := o.Spec.PredecessorBindingRef
		if ref == nil || ref.Name != b.Name || o.Namespace != b.Namespace || !boundReady(o) {
			continue
		}
		if next == nil || o.CreationTimestamp.After(next.CreationTimestamp) {
			next = o
		}
	}
	if next == nil {
		return "", nil
	}
	return next.Name, nil
}

// credentialsAuthenticator authenticates GETs of the credentials
// subresource that carry a bearer token of Bindery's audience: a TokenReview
// naming that audience, so kube-apiserver checks the token was issued for
// Bindery. Other requests, and tokens it does not take, go on to the
// cluster's delegated authentication. Its answers are cached for as long
// as the delegated authenticator's (10 s).
type credentialsAuthenticator struct {
	audiences authenticator.Audiences
	bearer    authenticator.Request
}

// newCredentialsAuthenticator builds the authenticator with the cluster's
// TokenReview client.
func newCredentialsAuthenticator(reviews authenticationv1.AuthenticationV1Interface, audience string) (*credentialsAuthenticator, error) {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	webhook, err := webhooktoken.NewFromInterface(reviews, nil, backoff, 10*time.Second, webhooktoken.AuthenticatorMetrics{
		RecordRequestTotal:   func(context.Context, string) {},
		RecordRequestLatency: func(context.Context, string, float64) {},
	})
	if err != nil {
		return nil, fmt.Errorf("credentials authenticator: %w", err)
	}
	auds := authenticator.Audiences{audience}
	cached := cache.New(audienceToken{auds: auds, inner: webhook}, false, 10*time.Second, 10*time.Second)
	return &credentialsAuthenticator{audiences: auds, bearer: group.NewAuthenticatedGroupAdder(bearertoken.New(audienceToken{auds: auds, inner: cached}))}, nil
}

// AuthenticateRequest takes only credentials reads.
func (a *credentialsAuthenticator) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	info, ok := genericapirequest.RequestInfoFrom(r.Context())
	if !ok || !isCredentialsRead(info) {
		return nil, false, nil
	}
	resp, ok, err := a.bearer.AuthenticateRequest(r)
	if !ok {
		// Not a token of Bindery's: the cluster's own may take it, and
		// the Authorization header must still be there for it.
		return nil, false, nil
	}
	return resp, ok, err
}

// isCredentialsRead says whether a request reads the credentials
// subresource of a ServiceBinding.
func isCredentialsRead(info *genericapirequest.RequestInfo) bool {
	return info.IsResourceRequest && info.APIGroup == v1beta1.GroupName && info.Resource == "servicebindings" &&
		info.Subresource == "credentials" && info.Verb == "get"
}

// audienceToken asks for tokens of the given audiences: the webhook then
// names them in its TokenReview, and the cache keys its answers by them.
type audienceToken struct {
	auds  authenticator.Audiences
	inner authenticator.Token
}

func (t audienceToken) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	return t.inner.AuthenticateToken(authenticator.WithAudiences(ctx, t.auds), token)
}
