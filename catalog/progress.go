package catalog

import (
	"time"

	"github.com/bindery-dev/bindery/internal/message"
)

// Progress is where an instance or binding stands, for people and for
// clients that wait on it: still working, done, failed for good, or
// blocked — and why, in words. The doors compute it from the object when
// they show it; it is never stored.
type Progress struct {
	// State is ready, working, retrying, waiting, blocked or failed
	// (message.State).
	State message.State `json:"state"`
	// Reason is the condition's reason code the state comes from.
	Reason string `json:"reason,omitempty"`
	// Message says it in words, with the fix when a person must act.
	Message string `json:"message"`
	// Detail is what the engine or the broker wrote (the condition's
	// message), when there is more to it than Message.
	Detail string `json:"detail,omitempty"`
	// Since is when the object entered this state, as far as its
	// conditions tell.
	Since *time.Time `json:"since,omitempty"`
}

// DefaultBlockedAfter is how long an object may wait for something that
// is missing (a class, a plan, an instance) before it counts as blocked:
// long enough for a broker registered alongside it to be fetched.
const DefaultBlockedAfter = 10 * time.Second

// progressInput is what Progress reads of an instance or a binding.
type progressInput struct {
	deleting                bool
	generation, reconciled  int64
	busy                    bool
	conditions              []Condition
	created                 time.Time
	missing                 func(reason string) string
	deletingMsg, workingMsg string
}

// InstanceProgress says where an instance stands at now; something
// missing for longer than blockedAfter makes it blocked.
func InstanceProgress(in *Instance, now time.Time, blockedAfter time.Duration) Progress {
	st := &in.Status
	return progressOf(progressInput{
		deleting: in.DeletionTimestamp != nil, generation: in.Generation, reconciled: st.ReconciledGeneration,
		busy:       st.AsyncOpInProgress || st.CurrentOperation != "",
		conditions: st.Conditions, created: in.CreationTimestamp,
		missing: func(reason string) string {
			switch reason {
			case ReasonNonexistentServiceClass:
				class, _, ns := instanceNames(in)
				return message.UnknownClass(class, ns)
			case ReasonNonexistentServicePlan:
				class, plan, _ := instanceNames(in)
				return message.UnknownPlan(plan, class)
			}
			return ""
		},
		deletingMsg: "It is being deprovisioned.", workingMsg: pending(in.Generation, "provision it"),
	}, now, blockedAfter)
}

// BindingProgress says where a binding stands at now, as InstanceProgress.
func BindingProgress(b *Binding, now time.Time, blockedAfter time.Duration) Progress {
	st := &b.Status
	return progressOf(progressInput{
		deleting: b.DeletionTimestamp != nil, generation: b.Generation, reconciled: st.ReconciledGeneration,
		busy:       st.AsyncOpInProgress || st.CurrentOperation != "",
		conditions: st.Conditions, created: b.CreationTimestamp,
		missing: func(reason string) string {
			if reason == ReasonNonexistentInstance {
				return message.UnknownInstance(b.Spec.InstanceRef.Name, b.Namespace)
			}
			return ""
		},
		deletingMsg: "Its credentials are being revoked.", workingMsg: pending(b.Generation, "bind it"),
	}, now, blockedAfter)
}

// pending says that the engine has yet to start on a generation.
func pending(generation int64, first string) string {
	if generation > 1 {
		return "It waits for the engine to apply the change."
	}
	return "It waits for the engine to " + first + "."
}

// instanceNames is the class and plan an instance names by external name
// (or object name, or id, the first given) and where they are looked for.
func instanceNames(in *Instance) (class, plan, namespace string) {
	s := &in.Spec
	class = firstOf(s.ClusterServiceClassExternalName, s.ClusterServiceClassName, s.ClusterServiceClassExternalID)
	plan = firstOf(s.ClusterServicePlanExternalName, s.ClusterServicePlanName, s.ClusterServicePlanExternalID)
	if class == "" {
		class = firstOf(s.ServiceClassExternalName, s.ServiceClassName, s.ServiceClassExternalID)
		plan = firstOf(s.ServicePlanExternalName, s.ServicePlanName, s.ServicePlanExternalID)
		namespace = in.Namespace
	}
	return class, plan, namespace
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func progressOf(p progressInput, now time.Time, blockedAfter time.Duration) Progress {
	ready, hasReady := FindCondition(p.conditions, ConditionReady)
	out := Progress{Reason: ready.Reason, Detail: ready.Message}
	if hasReady && !ready.LastTransitionTime.IsZero() {
		t := ready.LastTransitionTime
		out.Since = &t
	}
	if f, ok := FindCondition(p.conditions, ConditionFailed); ok && f.Status == ConditionTrue {
		out.State, out.Reason, out.Detail = message.Failed, f.Reason, f.Message
		t := f.LastTransitionTime
		out.Since = &t
		out.Message = message.ReasonOf(f.Reason).Sentence
		return out.trimDetail()
	}
	r := message.ReasonOf(ready.Reason)
	out.Message = r.Sentence
	switch {
	case !hasReady:
		out.State, out.Message = message.Working, p.workingMsg
		if p.deleting {
			out.Message = p.deletingMsg
		}
		out.Since = &p.created
	case r.State == message.Waiting:
		out.State = message.Waiting
		if m := p.missing(ready.Reason); m != "" {
			out.Message = m
		}
		since := p.created
		if out.Since != nil && out.Since.After(since) {
			since = *out.Since
		}
		if now.Sub(since) >= blockedAfter {
			out.State = message.Blocked
		}
	case r.State == message.Blocked:
		out.State = message.Blocked
	case p.deleting:
		out.State = message.Working
		if r.State == message.Retrying {
			out.State = message.Retrying
		}
	case ready.Status == ConditionTrue && !p.busy && p.reconciled >= p.generation:
		out.State = message.Ready
	case r.State == message.Retrying:
		out.State = message.Retrying
	default:
		out.State = message.Working
		if r.State == message.Ready {
			// Ready for an older generation: the new one is not started.
			out.Message = p.workingMsg
		}
	}
	return out.trimDetail()
}

// trimDetail drops a detail that says no more than the message.
func (p Progress) trimDetail() Progress {
	if p.Detail == p.Message {
		p.Detail = ""
	}
	return p
}
