package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/broker"
)

// TestOptionsValidateReportsAll checks that every problem is reported in
// one error, each naming its flag.
func TestOptionsValidateReportsAll(t *testing.T) {
	o := broker.Options{Username: "u", OperationTimeout: -time.Second, Workers: 0}
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"--broker-username and --broker-password go together", "--operation-timeout", "--workers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	o = broker.Options{Token: "t", OperationTimeout: time.Hour, OperationDeadline: time.Minute, Workers: 1}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--operation-deadline: must be at least --operation-timeout") {
		t.Errorf("a deadline shorter than one attempt: %v", err)
	}
	o = broker.Options{Token: "t", OperationTimeout: time.Minute, OperationDeadline: time.Hour, OperationRetention: time.Minute, Workers: 1}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--operation-retention: must be at least --operation-deadline") {
		t.Errorf("operations pruned before their deadline: %v", err)
	}
	o = broker.Options{OperationTimeout: time.Minute, OperationDeadline: time.Hour, OperationRetention: broker.DefaultOperationRetention, Workers: 1}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "no broker credentials") {
		t.Errorf("no credentials: %v", err)
	}
	o.Token = "t"
	if err := o.Validate(); err != nil {
		t.Errorf("a token alone: %v", err)
	}
}

// TestOptionsComplete sends instances to the catalog's own cluster unless
// another is named.
func TestOptionsComplete(t *testing.T) {
	var o broker.Options
	o.Complete("postgres://own/db")
	if o.TargetURL != "postgres://own/db" {
		t.Errorf("TargetURL %q", o.TargetURL)
	}
	o = broker.Options{TargetURL: "postgres://other/db"}
	o.Complete("postgres://own/db")
	if o.TargetURL != "postgres://other/db" {
		t.Errorf("TargetURL %q, want the one given", o.TargetURL)
	}
}
