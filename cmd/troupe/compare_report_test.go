package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unreadableJob is a job folder with two good results and three that
// cannot be read: bad JSON, implausible figures, too big to be troupe's.
// It returns the folder and the three bad results' paths.
func unreadableJob(t *testing.T) (string, []string) {
	t.Helper()
	job := filepath.Join(t.TempDir(), "job")
	good := `{"trial_name":"t__c__%d","task_name":"t","attempt":%d,"condition":"c","manifest_sha256":"aa","outcome":"passed","reward":1}`
	write(t, filepath.Join(job, "t__c__1", "result.json"), strings.NewReplacer("%d", "1").Replace(good))
	write(t, filepath.Join(job, "t__c__2", "result.json"), strings.NewReplacer("%d", "2").Replace(good))
	bad := []string{
		filepath.Join(job, "t__c__3", "result.json"),
		filepath.Join(job, "t__c__4", "result.json"),
		filepath.Join(job, "t__c__5", "result.json"),
	}
	write(t, bad[0], `{"trial_name":"t__c__3","outcome":`)
	write(t, bad[1], `{"trial_name":"t__c__4","task_name":"t","attempt":4,"condition":"c","outcome":"passed","agent_result":{"cost_usd":-5}}`)
	write(t, bad[2], "")
	// Over 16 MiB, without writing them: a sparse file.
	if err := os.Truncate(bad[2], 17<<20); err != nil {
		t.Fatal(err)
	}
	return job, bad
}

// A result skipped as unreadable is named in the saved report, in every
// format, not only on standard error; troupe compare still compares the
// rest and exits 0, with a warning.
func TestCompareNamesUnreadableResultsInEveryFormat(t *testing.T) {
	job, bad := unreadableJob(t)
	isolate(t)
	for _, format := range []string{"table", "markdown", "json", "html"} {
		out := filepath.Join(t.TempDir(), "report."+format)
		code, _, errOut := troupe(t, "compare", job, "--format", format, "--out", out)
		if code != exitOK {
			t.Fatalf("%s: exit %d, want %d: a partial comparison still compares\n%s", format, code, exitOK, errOut)
		}
		if !strings.Contains(errOut, "warning:") || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%s: standard error does not warn of %s:\n%s", format, bad[0], errOut)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range append(bad, "implausible figures", "too big to be troupe") {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s report does not name %q:\n%s", format, want, data)
			}
		}
	}
	// With nothing readable, there is nothing to compare: exit 1.
	only := filepath.Join(t.TempDir(), "job")
	write(t, filepath.Join(only, "x__c__1", "result.json"), `{"trial_name":`)
	if code, _, errOut := troupe(t, "compare", only); code != exitFailed || !strings.Contains(errOut, "x__c__1") {
		t.Errorf("only unreadable results: exit %d\n%s", code, errOut)
	}
}
