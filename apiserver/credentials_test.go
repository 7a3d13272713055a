package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// credentialsSetup is a delegated server on a real kube-apiserver, with an
// instance of the fake broker and a binding of it in namespace shop.
type credentialsSetup struct {
	srv     *apiserver.Config
	kube    kubernetes.Interface
	sc      versioned.Interface // as the cluster's admin, straight to the server
	store   *catalog.Store
	binding *catalog.Binding
}

func setupCredentials(t *testing.T) *credentialsSetup {
	t.Helper()
	cluster := kubetest.Start(t)
	store := apiserver.NewTestStore(t)
	apiserver.RegisterFakeBroker(t, store)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := runServer(t, &apiserver.Options{Listener: l, DataDir: filepath.Join(t.TempDir(), "apiserver"), ClusterKubeconfig: cluster.Kubeconfig()}, store, log)
	cfg := &rest.Config{Host: srv.Server, BearerToken: cluster.Token(kubetest.Admin), TLSClientConfig: rest.TLSClientConfig{CAData: srv.CAData}}
	sc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &credentialsSetup{srv: srv, kube: cluster.Client(t), sc: sc, store: store}
	ctx := t.Context()
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		_, err := sc.ServicecatalogV1beta1().ServiceInstances("shop").Create(ctx, &v1beta1.ServiceInstance{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{
				ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}},
		}, metav1.CreateOptions{})
		return err // the namespace reaches the server's informer first
	})
	b := s.bind(t, "orders", nil)
	s.binding = b
	return s
}

// bind creates a binding of db, stores credentials for it and marks it
// Ready, as the engine would after the broker answered.
func (s *credentialsSetup) bind(t *testing.T, name string, transforms []v1beta1.SecretTransform) *catalog.Binding {
	t.Helper()
	ctx := t.Context()
	created, err := s.sc.ServicecatalogV1beta1().ServiceBindings("shop").Create(ctx, &v1beta1.ServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{catalog.NoSecretAnnotation: "true"}},
		Spec:       v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}, SecretTransforms: transforms},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := string(created.UID)
	b, err := s.store.UpdateBindingStatus(ctx, id, func(b *catalog.Binding) error {
		b.Status.ReconciledGeneration = b.Generation
		catalog.SetCondition(&b.Status.Conditions, catalog.Condition{Type: catalog.ConditionReady, Status: catalog.ConditionTrue, Reason: "InjectedBindResult"}, time.Now())
		return nil
	}, map[string]any{"password": "pw-" + name, "port": 5432, "USER": "u-" + name})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// token is a token of the service account for audience ("" for the
// cluster's own).
func (s *credentialsSetup) token(t *testing.T, sa, audience string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := s.kube.CoreV1().ServiceAccounts("shop").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	req := &authenticationv1.TokenRequest{}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := s.kube.CoreV1().ServiceAccounts("shop").CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// get reads path on the server with a bearer token, as the CSI driver does.
func (s *credentialsSetup) get(t *testing.T, path, token string) (int, []byte) {
	t.Helper()
	cfg := &rest.Config{Host: s.srv.Server, TLSClientConfig: rest.TLSClientConfig{CAData: s.srv.CAData}}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.srv.Server+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

const credentialsPath = "/apis/servicecatalog.k8s.io/v1beta1/namespaces/shop/servicebindings/%s/credentials"

// TestCredentialsSubresource: a Pod's token of Bindery's audience reads
// the credentials subresource, shaped as the binding's Secret would be,
// when RBAC grants its service account servicebindings/credentials; a
// service account without the grant is refused with the permission named;
// a token for another audience is not taken; the token of Bindery's
// audience opens nothing else on the server.
func TestCredentialsSubresource(t *testing.T) {
	t.Parallel()
	s := setupCredentials(t)
	ctx := t.Context()
	if _, err := s.kube.RbacV1().Roles("shop").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "credentials"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1beta1.GroupName}, Resources: []string{"servicebindings/credentials"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.kube.RbacV1().RoleBindings("shop").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "web-credentials"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "credentials"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "web", Namespace: "shop"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := s.token(t, "web", apiserver.DefaultCredentialsAudience)

	var creds v1beta1.ServiceBindingCredentials
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error { // RBAC's cache
		code, body := s.get(t, fmt.Sprintf(credentialsPath, "orders"), web)
		if code != http.StatusOK {
			return fmt.Errorf("%d: %s", code, body)
		}
		return json.Unmarshal(body, &creds)
	})
	want := map[string]string{"password": "pw-orders", "port": "5432", "USER": "u-orders", "type": osbtest.DefaultService, "provider": "fake"}
	if len(creds.Data) != len(want) {
		t.Errorf("keys %d, want %d", len(creds.Data), len(want))
	}
	for k, v := range want {
		if string(creds.Data[k]) != v {
			t.Errorf("%s = %q, want %q", k, creds.Data[k], v)
		}
	}
	if creds.Name != "orders" || creds.Namespace != "shop" || string(creds.UID) != s.binding.ID || creds.Kind != "ServiceBindingCredentials" || creds.Successor != "" {
		t.Errorf("object: %+v", creds.ObjectMeta)
	}

	// Another service account of the namespace: 403, naming the resource.
	other := s.token(t, "other", apiserver.DefaultCredentialsAudience)
	code, body := s.get(t, fmt.Sprintf(credentialsPath, "orders"), other)
	if code != http.StatusForbidden || !strings.Contains(string(body), `system:serviceaccount:shop:other`) || !strings.Contains(string(body), `servicebindings/credentials`) {
		t.Errorf("a service account without the grant: %d %s", code, body)
	}
	// The cluster's own token of web works too (RBAC decides); one of
	// another audience is not taken.
	if code, body := s.get(t, fmt.Sprintf(credentialsPath, "orders"), s.token(t, "web", "")); code != http.StatusOK {
		t.Errorf("web's token for the cluster: %d %s", code, body)
	}
	if code, body := s.get(t, fmt.Sprintf(credentialsPath, "orders"), s.token(t, "web", "elsewhere.example")); code != http.StatusUnauthorized {
		t.Errorf("web's token for another audience: %d %s", code, body)
	}
	// Bindery's audience opens the credentials subresource only.
	if code, body := s.get(t, "/apis/servicecatalog.k8s.io/v1beta1/namespaces/shop/servicebindings/orders", web); code != http.StatusUnauthorized {
		t.Errorf("the binding itself with a token of Bindery's audience: %d %s", code, body)
	}
	// The view of the binding through the typed client as the admin.
	got, err := s.sc.ServicecatalogV1beta1().ServiceBindings("shop").GetCredentials(ctx, "orders", metav1.GetOptions{})
	if err != nil || string(got.Data["password"]) != "pw-orders" {
		t.Errorf("GetCredentials: %v", err)
	}
}

// TestCredentialsSubresourceStates: transforms are applied as for a
// Secret; addKeysFrom, which needs a Secret, is refused naming the
// transform; a binding that is not Ready answers 409, an unknown one 404.
func TestCredentialsSubresourceStates(t *testing.T) {
	t.Parallel()
	s := setupCredentials(t)
	ctx := t.Context()
	api := s.sc.ServicecatalogV1beta1().ServiceBindings("shop")
	s.bind(t, "renamed", []v1beta1.SecretTransform{
		{RenameKey: &v1beta1.RenameKeyTransform{From: "USER", To: "username"}},
		{AddKey: &v1beta1.AddKeyTransform{Key: "uri", JSONPathExpression: "{.USER}:{.password}@db:{.port}"}},
		{RemoveKey: &v1beta1.RemoveKeyTransform{Key: "port"}},
	})
	got, err := api.GetCredentials(ctx, "renamed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data["username"]) != "u-renamed" || string(got.Data["uri"]) != "u-renamed:pw-renamed@db:5432" || got.Data["port"] != nil || got.Data["USER"] != nil {
		t.Errorf("transformed keys: %v", keys(got.Data))
	}

	s.bind(t, "from-secret", []v1beta1.SecretTransform{{AddKeysFrom: &v1beta1.AddKeysFromTransform{SecretRef: &v1beta1.ObjectReference{Name: "extra"}}}})
	_, err = api.GetCredentials(ctx, "from-secret", metav1.GetOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.secretTransforms[0].addKeysFrom") || !strings.Contains(err.Error(), `"extra"`) {
		t.Errorf("addKeysFrom: %v", err)
	}

	if _, err := api.Create(ctx, &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "pending"},
		Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.GetCredentials(ctx, "pending", metav1.GetOptions{}); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "not Ready") {
		t.Errorf("a binding without credentials: %v", err)
	}
	if _, err := api.GetCredentials(ctx, "nothing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("no such binding: %v", err)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
