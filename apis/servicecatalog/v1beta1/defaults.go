package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DefaultRelistDuration is how often a broker's catalog is fetched when its
// spec says Duration without an interval, as in Service Catalog and
// catalog.DefaultRelistDuration.
const DefaultRelistDuration = 15 * time.Minute

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_ClusterServiceBrokerSpec fills in the relist settings: Duration
// every 15 minutes unless the spec says otherwise. The catalog applies the
// same defaults to brokers registered through its REST API.
func SetDefaults_ClusterServiceBrokerSpec(spec *ClusterServiceBrokerSpec) {
	if spec.RelistBehavior == "" {
		spec.RelistBehavior = ServiceBrokerRelistBehaviorDuration
	}
	if spec.RelistBehavior == ServiceBrokerRelistBehaviorDuration && spec.RelistDuration == nil {
		spec.RelistDuration = &metav1.Duration{Duration: DefaultRelistDuration}
	}
}

// SetDefaults_ServiceBrokerSpec gives a ServiceBroker the relist defaults
// of a ClusterServiceBroker.
func SetDefaults_ServiceBrokerSpec(spec *ServiceBrokerSpec) {
	if spec.RelistBehavior == "" {
		spec.RelistBehavior = ServiceBrokerRelistBehaviorDuration
	}
	if spec.RelistBehavior == ServiceBrokerRelistBehaviorDuration && spec.RelistDuration == nil {
		spec.RelistDuration = &metav1.Duration{Duration: DefaultRelistDuration}
	}
}
