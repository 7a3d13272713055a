package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestSecretsInCluster registers Bindery's own broker, provisions and binds
// into a namespace of a real kube-apiserver, reads the Secret with
// client-go and connects to the database with what it holds; then checks
// transforms, a Secret Bindery does not own, repair, and deletion.
func TestSecretsInCluster(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	kube := cluster.Client(t)
	e := setup(t, func(o *engineOptions) { o.kube = kube })
	e.registerBindery()
	ctx := context.Background()
	ns := "test"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := e.createInstance("db", "postgresql", "small", nil)
	e.waitInstance(in.ID, "Ready", instanceReady)

	b := e.createBinding("app", "db")
	b = e.waitBinding(b.ID, "Ready", bindingReady)
	s, err := kube.CoreV1().Secrets(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the binding's Secret: %v", err)
	}
	// A Provisioned Service of servicebinding.io: status.binding names the
	// Secret; the broker's endpoints are kept with the binding.
	if b.Status.Binding == nil || b.Status.Binding.Name != "app" {
		t.Errorf("status.binding = %+v, want the Secret app", b.Status.Binding)
	}
	if len(b.Status.Endpoints) != 1 || b.Status.Endpoints[0].Host == "" || len(b.Status.Endpoints[0].Ports) != 1 || b.Status.Endpoints[0].Protocol != "tcp" {
		t.Errorf("status.endpoints = %+v, want the database's host and port", b.Status.Endpoints)
	}
	if s.Type != "servicebinding.io/postgresql" || string(s.Data["type"]) != "postgresql" || string(s.Data["provider"]) != "bindery" {
		t.Errorf("Secret type %q, data type %q, provider %q", s.Type, s.Data["type"], s.Data["provider"])
	}
	if len(s.OwnerReferences) != 1 || string(s.OwnerReferences[0].UID) != b.ID || s.Labels[controller.LabelBindingID] != b.ID {
		t.Errorf("Secret owner %+v, labels %v", s.OwnerReferences, s.Labels)
	}
	conn, err := pgx.Connect(ctx, string(s.Data["uri"]))
	if err != nil {
		t.Fatalf("connect with the Secret's uri: %v", err)
	}
	conn.Close(ctx)

	// Repair: a changed Secret is put back, a deleted one recreated.
	changed := s.DeepCopy()
	changed.Data["uri"] = []byte("postgres://tampered")
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, kube, ns, "app", func(s *corev1.Secret) bool { return string(s.Data["uri"]) != "postgres://tampered" })
	if err := kube.CoreV1().Secrets(ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret(t, kube, ns, "app", func(*corev1.Secret) bool { return true })

	// Transforms, as Service Catalog v1beta1 defined them.
	tb := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}, SecretName: "app-env",
		SecretTransforms: []catalog.SecretTransform{
			{RenameKey: &catalog.RenameKeyTransform{From: "uri", To: "DATABASE_URL"}},
			{AddKey: &catalog.AddKeyTransform{Key: "DB_NAME", JSONPathExpression: "{.database}"}},
			{AddKey: &catalog.AddKeyTransform{Key: "MODE", StringValue: "production"}},
			{RemoveKey: &catalog.RemoveKeyTransform{Key: "jdbcUrl"}},
		}}}
	tb.Name, tb.Namespace = "env", ns
	tb, err = e.store.CreateBinding(ctx, tb)
	if err != nil {
		t.Fatal(err)
	}
	e.waitBinding(tb.ID, "Ready", bindingReady)
	env, err := kube.CoreV1().Secrets(ns).Get(ctx, "app-env", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has := env.Data["uri"]; has || len(env.Data["DATABASE_URL"]) == 0 || string(env.Data["MODE"]) != "production" ||
		len(env.Data["DB_NAME"]) == 0 || env.Data["jdbcUrl"] != nil {
		t.Errorf("transformed keys: %v", keys(env.Data))
	}

	// A Secret Bindery does not own is left alone, and the status says so.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, StringData: map[string]string{"mine": "yes"}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fb := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}, SecretName: "taken"}}
	fb.Name, fb.Namespace = "foreign", ns
	fb, err = e.store.CreateBinding(ctx, fb)
	if err != nil {
		t.Fatal(err)
	}
	e.waitBinding(fb.ID, "refused", func(b *catalog.Binding) bool {
		return condition(b.Status.Conditions, catalog.ConditionReady).Reason == "ErrorSecretNotOwned"
	})
	if got, _ := kube.CoreV1().Secrets(ns).Get(ctx, "taken", metav1.GetOptions{}); string(got.Data["mine"]) != "yes" || len(got.Data) != 1 {
		t.Errorf("the foreign Secret was changed: %v", keys(got.Data))
	}

	// Unbinding deletes the Secret itself (no garbage collector runs here).
	for _, id := range []string{b.ID, tb.ID, fb.ID} {
		if _, err := e.store.DeleteBinding(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"app", "app-env"} {
		waitNoSecret(t, kube, ns, name)
	}
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "taken", metav1.GetOptions{}); err != nil {
		t.Errorf("the foreign Secret was deleted with the binding that could not use it: %v", err)
	}
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func waitSecret(t *testing.T, kube kubernetes.Interface, ns, name string, cond func(*corev1.Secret) bool) {
	t.Helper()
	eventually.Succeeds(t, 20*time.Second, func(ctx context.Context) error {
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !cond(s) {
			return fmt.Errorf("Secret %s/%s is not as expected yet", ns, name)
		}
		return nil
	})
}

func waitNoSecret(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	eventually.Succeeds(t, 20*time.Second, func(ctx context.Context) error {
		_, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret %s/%s was not deleted (%v)", ns, name, err)
		}
		return nil
	})
}

// TestBoundWriteLost: the engine writes a binding's Secret, then stores its
// credentials and Ready in one write. When that write is lost (here it
// fails once in PostgreSQL, as if the engine stopped between the two), the
// bind is still in flight: it is sent again, the broker answers with the
// same binding, and the binding ends Ready with its Secret and its
// credentials stored.
func TestBoundWriteLost(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	kube := cluster.Client(t)
	e := setup(t, func(o *engineOptions) { o.kube = kube })
	broker := e.registerFake()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	// The first write that makes a binding Ready fails (a sequence, since
	// what the failing transaction changes is rolled back).
	if _, err := e.pool.Exec(ctx, `CREATE SEQUENCE lost_writes;
		CREATE FUNCTION lose_ready() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.status->'conditions' @> '[{"type": "Ready", "status": "True"}]' THEN
				IF nextval('lost_writes') = 1 THEN
					RAISE EXCEPTION 'the write is lost';
				END IF;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER lose_ready BEFORE UPDATE ON catalog.bindings FOR EACH ROW EXECUTE FUNCTION lose_ready();`); err != nil {
		t.Fatal(err)
	}
	b := e.createBinding("app", "db")
	b = e.waitBinding(b.ID, "Ready", bindingReady)
	var lost int64
	if err := e.pool.QueryRow(ctx, `SELECT last_value FROM lost_writes`).Scan(&lost); err != nil || lost < 2 {
		t.Fatalf("the Ready write was not lost once and then made (sequence at %d, %v)", lost, err)
	}
	if n := broker.Count(osbtest.VerbBind); n != 2 {
		t.Errorf("%d bind requests, want 2: the lost write's and the one after", n)
	}
	creds, err := e.store.Credentials(ctx, b.ID)
	if err != nil || len(creds) == 0 {
		t.Fatalf("credentials stored: %v, %v", creds, err)
	}
	s, err := kube.CoreV1().Secrets("test").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the binding's Secret: %v", err)
	}
	for k, v := range creds {
		if sv, ok := v.(string); ok && string(s.Data[k]) != sv {
			t.Errorf("Secret %s = %q, stored credentials have %q", k, s.Data[k], sv)
		}
	}
}

// TestSecretRefusedBacksOff: a bind whose Secret cannot be written (its
// name is another's Secret; the cluster refuses it, here by an admission
// policy) says why in Ready and lastError, and is tried again after its
// backoff, not as often as the broker answers: each attempt binds again.
func TestSecretRefusedBacksOff(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	kube := cluster.Client(t)
	e := setup(t, func(o *engineOptions) { o.kube = kube; o.retryBase = time.Second; o.retryCap = time.Minute })
	broker := e.registerFake()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets("test").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "taken"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-denied"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "object.metadata.name != 'denied'", Message: "no Secret named denied"}}}}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-denied"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-denied", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The policy is in force once a Secret it refuses is refused.
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		_, err := kube.CoreV1().Secrets("test").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "denied"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("a Secret named denied: %v", err)
	})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	ids := map[string]string{}
	for _, secret := range []string{"taken", "denied"} {
		b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}, SecretName: secret}}
		b.Name, b.Namespace = secret, "test"
		b, err := e.store.CreateBinding(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		ids[secret] = b.ID
	}
	e.waitBinding(ids["taken"], "refused", func(b *catalog.Binding) bool {
		return condition(b.Status.Conditions, catalog.ConditionReady).Reason == "ErrorSecretNotOwned"
	})
	before := broker.Count(osbtest.VerbBind)
	time.Sleep(4 * time.Second)
	// Backoffs of 1, 2 and 4 s: a few binds each, not hundreds.
	if n := broker.Count(osbtest.VerbBind) - before; n > 8 {
		t.Errorf("%d binds in 4 s for two bindings whose Secrets are refused", n)
	}
	e.waitBinding(ids["denied"], "refused", func(b *catalog.Binding) bool {
		return condition(b.Status.Conditions, catalog.ConditionReady).Reason == "ErrorInjectingBindResult" && strings.Contains(b.Status.LastError, "no Secret named denied")
	})
}
