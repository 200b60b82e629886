package trialdir

import "testing"

// TestTrialName: a trial's folder is <task>__<condition>__<attempt>, the
// name the job gives it and the commands find it by.
func TestTrialName(t *testing.T) {
	for _, c := range []struct {
		task, condition string
		attempt         int
		want            string
	}{
		{"hello-world", "hello-solo-mock", 1, "hello-world__hello-solo-mock__1"},
		{"t", "c", 12, "t__c__12"},
	} {
		if got := TrialName(c.task, c.condition, c.attempt); got != c.want {
			t.Errorf("TrialName(%q, %q, %d) = %q, want %q", c.task, c.condition, c.attempt, got, c.want)
		}
	}
}
