package trialdir

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

var update = flag.Bool("update", false, "rewrite testdata/result-filled.json")

// filled sets every field v reaches, pointers and maps included, to a
// value derived from its Go path ("r.Config.Agent.Name"), and every bool
// to true so that no omitempty field is left out. An amount of money is
// set to a whole number of micro-dollars, as it is written and read back.
func filled(v reflect.Value, path string) {
	hash := func(s string) int64 { h := fnv.New32a(); h.Write([]byte(s)); return int64(h.Sum32()) }
	at := func(path string) time.Time { return time.Unix(hash(path), hash(path+"n")%1e9).UTC() }
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type() == reflect.TypeFor[*time.Time]() {
			t := at(path)
			v.Set(reflect.ValueOf(&t))
			return
		}
		p := reflect.New(v.Type().Elem())
		filled(p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(at(path)))
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				filled(v.Field(i), path+"."+f.Name)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			filled(s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			filled(k, fmt.Sprintf("%s{k%d}", path, i))
			filled(e, fmt.Sprintf("%s{v%d}", path, i))
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(hash(path) % 100000)
	case reflect.Float64:
		f := float64(hash(path)%100000) / 7
		if v.Type() == reflect.TypeFor[modelcall.USD]() {
			f = modelcall.USD(f).Micro()
		}
		v.SetFloat(f)
	default:
		panic(fmt.Sprintf("%s: a %s: teach filled to fill it", path, v.Kind()))
	}
}

// TestResultBytes: a result with every field set is written byte for byte
// as troupe has written result.json (testdata/result-filled.json was
// written by package trial's Result before trialdir owned the format):
// the same keys, in the same order, nested where they were. It reads
// back as it was.
func TestResultBytes(t *testing.T) {
	var res TrialResult
	filled(reflect.ValueOf(&res).Elem(), "r")
	var buf bytes.Buffer
	if err := WriteResult(&buf, &res); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "result-filled.json")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		got, wantLines := strings.Split(buf.String(), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(got), len(wantLines)) {
			if got[i] != wantLines[i] {
				t.Fatalf("result.json differs from %s at line %d:\n got %s\nwant %s", golden, i+1, got[i], wantLines[i])
			}
		}
		t.Fatalf("result.json has %d lines, %s %d", len(got), golden, len(wantLines))
	}
	back, err := DecodeResult(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*back, res) {
		t.Errorf("read back differs:\n%+v\nwant\n%+v", *back, res)
	}
}

// TestResultWritesMoneyToTheMicroDollar: costs added up call by call
// carry float noise (seven calls of $0.0034 make 0.023799999999999998);
// result.json writes every amount to the micro-dollar: the trial's, each
// agent's, a replay's live cost.
func TestResultWritesMoneyToTheMicroDollar(t *testing.T) {
	var agent modelcall.Totals
	for range 7 {
		agent.AddUsage(modelcall.Record{CostUSD: 0.0034})
	}
	if agent.CostUSD == 0.0238 {
		t.Fatal("the sum has no noise to round: pick other costs")
	}
	res := TrialResult{
		AgentResult: AgentResult{CostUSD: agent.CostUSD + agent.CostUSD},
		Agents:      []AgentRecord{{ID: "a-1", Usage: agent}, {ID: "a-2", Usage: agent}},
		Replay:      &ReplayRecord{ReplayReport: &modelcall.ReplayReport{Agents: []modelcall.ReplayAgent{{ID: "a-1", LiveCostUSD: agent.CostUSD}}}},
	}
	var buf bytes.Buffer
	if err := WriteResult(&buf, &res); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`"((?:live_)?cost_usd)": ([^,\n]+)`).FindAllStringSubmatch(buf.String(), -1) {
		got = append(got, m[1]+"="+m[2])
	}
	if want := "cost_usd=0.0476 cost_usd=0.0238 cost_usd=0.0238 live_cost_usd=0.0238"; strings.Join(got, " ") != want {
		t.Errorf("result.json's amounts: %s\nwant %s", strings.Join(got, " "), want)
	}
	back, err := DecodeResult(&buf)
	if err != nil || back.AgentResult.CostUSD != 0.0476 || back.Agents[0].Usage.CostUSD != 0.0238 {
		t.Errorf("read back: %v", err)
		if err == nil {
			t.Logf("the trial's $%v, a-1's $%v", float64(back.AgentResult.CostUSD), float64(back.Agents[0].Usage.CostUSD))
		}
	}
}

// TestDecodeResult: a result is read whole and within MaxResult; one over
// it is refused with ErrTooBig, before it is read when the reader is a
// file; what is not a result's JSON is an error.
func TestDecodeResult(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"trial_name":"t__c__1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxResult+1); err != nil { // sparse: nothing to read
		t.Fatal(err)
	}
	padded := append(bytes.Repeat([]byte(" "), MaxResult-len(`{"attempt":2}`)), `{"attempt":2}`...)
	for _, tc := range []struct {
		name    string
		open    func(t *testing.T) io.Reader
		attempt int
		err     string
		tooBig  bool
	}{
		{"a result", func(*testing.T) io.Reader { return strings.NewReader(`{"trial_name":"t__c__1","attempt":3}`) }, 3, "", false},
		{"exactly MaxResult bytes", func(*testing.T) io.Reader { return bytes.NewReader(padded) }, 2, "", false},
		{"a reader over MaxResult", func(*testing.T) io.Reader { return bytes.NewReader(append(padded, ' ')) }, 0, "over 16777216 bytes", true},
		{"a file over MaxResult", func(t *testing.T) io.Reader {
			f, err := os.Open(big)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, 0, "over 16777216 bytes: too big to be troupe's", true},
		{"a file that says it is over MaxResult, unread", func(t *testing.T) io.Reader {
			info, err := os.Stat(big)
			if err != nil {
				t.Fatal(err)
			}
			return statReader{strings.NewReader(`{"attempt":1}`), info}
		}, 0, "over 16777216 bytes", true},
		{"bad JSON", func(*testing.T) io.Reader { return strings.NewReader(`{"trial_name":`) }, 0, "unexpected end of JSON input", false},
		{"a field of another type", func(*testing.T) io.Reader { return strings.NewReader(`{"attempt":"one"}`) }, 0, "cannot unmarshal string", false},
		{"two documents", func(*testing.T) io.Reader { return strings.NewReader(`{} {}`) }, 0, "invalid character", false},
		{"a failing reader", func(*testing.T) io.Reader { return iotest.ErrReader(errors.New("disk gone")) }, 0, "disk gone", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := DecodeResult(tc.open(t))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err == "":
				if res.Attempt != tc.attempt {
					t.Errorf("attempt %d, want %d", res.Attempt, tc.attempt)
				}
			case err == nil || !strings.Contains(err.Error(), tc.err):
				t.Errorf("error %v, want %q", err, tc.err)
			case errors.Is(err, ErrTooBig) != tc.tooBig:
				t.Errorf("error %v: errors.Is(ErrTooBig) is %v", err, !tc.tooBig)
			}
		})
	}
}

// statReader is a reader that tells a size, as a file does.
type statReader struct {
	io.Reader
	info fs.FileInfo
}

func (s statReader) Stat() (fs.FileInfo, error) { return s.info, nil }

// TestReadResult: a missing result is the file system's error, as resuming
// and replays test it; one that cannot be read as a result names its path.
func TestReadResult(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadResult(filepath.Join(dir, Result)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing result: %v, want fs.ErrNotExist", err)
	}
	path := filepath.Join(dir, Result)
	if err := os.WriteFile(path, []byte(`{"outcome":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadResult(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("bad JSON: %v, want the path first", err)
	}
	if err := os.WriteFile(path, []byte(`{"outcome":"passed","trial_name":"t__c__1"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ReadResult(path)
	if err != nil || res.TrialName != "t__c__1" || !res.Finished() {
		t.Errorf("%+v %v", res, err)
	}
}

// TestResultNeedsNoMachinery: every reader of result.json imports trialdir,
// so trialdir imports none of what runs a trial: not the trial itself, the
// gateway, the relay, the task loader (compose-go) or manifests.
func TestResultNeedsNoMachinery(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/troupebench/troupe/trialdir") {
		t.Fatalf("go list named %v: not trialdir's imports", deps)
	}
	for _, p := range []string{"trial", "llm", "relay", "task", "manifest", "stack", "job", "report"} {
		if slices.Contains(deps, "github.com/troupebench/troupe/"+p) {
			t.Errorf("trialdir imports %s: the result's format must be readable without it", p)
		}
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/compose-spec/") {
			t.Errorf("trialdir imports %s (the task loader's)", p)
		}
	}
}
