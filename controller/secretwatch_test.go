package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSecretChanged(t *testing.T) {
	secret := func(rv string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name     string
		old, obj any
		want     bool
	}{
		{"a relist hands the same Secret back", secret("7"), secret("7"), false},
		{"written since", secret("7"), secret("9"), true},
		{"not a Secret", nil, secret("9"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := secretChanged(tc.old, tc.obj); got != tc.want {
				t.Errorf("secretChanged: %v, want %v", got, tc.want)
			}
		})
	}
}
