package catalog

// Endpoint is a network endpoint that an OSB 2.17 broker returns with a
// binding: where the application connects. The servicebinding.io webhook
// writes the endpoints of the bindings projected into a Pod as its egress
// annotation.
type Endpoint struct {
	Host string `json:"host"`
	// Ports are single ports or ranges ("5432", "6000-6010"), as OSB writes them.
	Ports []string `json:"ports"`
	// Protocol is tcp, udp or all.
	Protocol string `json:"protocol,omitempty"`
}

// SecretReference names a Secret in the binding's namespace.
type SecretReference struct {
	Name string `json:"name"`
}
