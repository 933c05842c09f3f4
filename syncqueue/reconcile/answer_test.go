package reconcile

import (
	"fmt"
	"strings"
	"testing"
)

// answerCase is one answer and the verdict docs/sync.md gives it. Its name
// starts with the id of the row it tries.
type answerCase struct {
	name string
	a    Answer
	want Verdict
}

var answerCases = []answerCase{
	{"R19 create answered 200", Answer{Op: UploadCreate, Status: 200}, VerdictSettle},
	{"R19 update answered 200", Answer{Op: UploadUpdate, Status: 200}, VerdictSettle},
	{"R19 move answered 200", Answer{Op: UploadMove, Status: 200}, VerdictSettle},
	{"R19 answered 200, the journal could not record it", Answer{Op: UploadUpdate, Status: 200, Unrecorded: true}, VerdictUnrecorded},
	{"R20 update answered 409 precondition failed", Answer{Op: UploadUpdate, Status: 409, Code: CodePrecondition}, VerdictResolve},
	{"R20 move answered 409 precondition failed", Answer{Op: UploadMove, Status: 409, Code: CodePrecondition}, VerdictResolve},
	{"R20 delete answered 409 precondition failed", Answer{Op: UploadDelete, Status: 409, Code: CodePrecondition}, VerdictResolve},
	{"R21 update answered 404", Answer{Op: UploadUpdate, Status: 404}, VerdictRecreate},
	{"R22 create answered 409 path conflict, the memory holds the bytes sent", Answer{Op: UploadCreate, Status: 409, Code: CodePathConflict, HoldsSent: true}, VerdictSettle},
	{"R22 update answered 409 precondition failed, the memory holds the bytes sent", Answer{Op: UploadUpdate, Status: 409, Code: CodePrecondition, HoldsSent: true}, VerdictSettle},
	{"R23 create answered 200 with another local file's memory", Answer{Op: UploadCreate, Status: 200, OthersMemory: true}, VerdictRetryPath},
	{"R23 create answered 409 path conflict", Answer{Op: UploadCreate, Status: 409, Code: CodePathConflict}, VerdictRetryPath},
	{"R23 update (a move) answered 409 path conflict", Answer{Op: UploadUpdate, Status: 409, Code: CodePathConflict}, VerdictRetryPath},
	{"R24 create answered 422 memory_limit_reached", Answer{Op: UploadCreate, Status: 422, Code: CodeMemoryLimit}, VerdictWaitCap},
	{"R25 update answered 400", Answer{Op: UploadUpdate, Status: 400}, VerdictRefused},
	{"R25 create answered 413", Answer{Op: UploadCreate, Status: 413}, VerdictRefused},
	{"R26 update answered 401", Answer{Op: UploadUpdate, Status: 401}, VerdictCredential},
	{"R26 delete answered 403", Answer{Op: UploadDelete, Status: 403}, VerdictCredential},
	{"R27 create, no answer (network error)", Answer{Op: UploadCreate}, VerdictOutage},
	{"R27 update answered 429", Answer{Op: UploadUpdate, Status: 429}, VerdictOutage},
	{"R27 update answered 500", Answer{Op: UploadUpdate, Status: 500}, VerdictOutage},
	{"R27 create answered 503", Answer{Op: UploadCreate, Status: 503}, VerdictOutage},
	{"R27 create answered 404: not a row of its own", Answer{Op: UploadCreate, Status: 404}, VerdictOutage},
	{"R27 cancelled before an answer", Answer{Op: UploadUpdate, Canceled: true}, VerdictCutShort},
	{"deletes delete answered 404: already gone", Answer{Op: UploadDelete, Status: 404}, VerdictSettle},
	{"R19 delete answered 200", Answer{Op: UploadDelete, Status: 200}, VerdictSettle},
}

// failing returns the cases whose verdict under rules is not the one the
// docs give.
func failing(rules []AnswerRule) []string {
	var bad []string
	for _, c := range answerCases {
		if got, _ := judgeWith(rules, c.a); got != c.want {
			bad = append(bad, fmt.Sprintf("%s: %v, want %v", c.name, got, c.want))
		}
	}
	return bad
}

func TestAnswerRules(t *testing.T) {
	for _, c := range answerCases {
		t.Run(c.name, func(t *testing.T) {
			got, rule := JudgeAnswer(c.a)
			if got != c.want {
				t.Fatalf("JudgeAnswer(%+v) = %v by %s (%s), want %v", c.a, got, rule.ID, rule.When, c.want)
			}
			if id, _, _ := strings.Cut(c.name, " "); rule.ID != id {
				t.Fatalf("JudgeAnswer(%+v) was decided by %s (%s), want row %s", c.a, rule.ID, rule.When, id)
			}
		})
	}
}

// TestAnswerRulesEachCited: every rule of the table is the deciding rule
// of at least one case, and every row R19–R27 has a case.
func TestAnswerRulesEachCited(t *testing.T) {
	for i, r := range AnswerRules {
		cited := false
		for _, c := range answerCases {
			if _, by := JudgeAnswer(c.a); by.ID == r.ID && by.When == r.When {
				cited = true
			}
		}
		if !cited {
			t.Errorf("rule %d (%s, %s) decides no case", i, r.ID, r.When)
		}
	}
	for n := 19; n <= 27; n++ {
		id := fmt.Sprintf("R%d", n)
		found := false
		for _, c := range answerCases {
			found = found || strings.HasPrefix(c.name, id+" ")
		}
		if !found {
			t.Errorf("no case for row %s", id)
		}
	}
}

// TestAnswerRulesBroken breaks each rule of the table once, in two ways:
// its verdict replaced by another, and the rule removed. Each time at
// least one case that cites the rule's row must fail.
func TestAnswerRulesBroken(t *testing.T) {
	caught, broken := 0, 0
	for i, r := range AnswerRules {
		other := VerdictOutage
		if r.Verdict == VerdictOutage {
			other = VerdictSettle
		}
		replaced := append([]AnswerRule(nil), AnswerRules...)
		replaced[i].Verdict = other
		removed := append(append([]AnswerRule(nil), AnswerRules[:i]...), AnswerRules[i+1:]...)
		for _, m := range []struct {
			how   string
			rules []AnswerRule
		}{{"verdict replaced by " + other.String(), replaced}, {"removed", removed}} {
			broken++
			citing := false
			for _, f := range failing(m.rules) {
				citing = citing || strings.HasPrefix(f, r.ID+" ")
			}
			if !citing {
				t.Errorf("rule %d (%s, %s) %s: no case citing %s fails", i, r.ID, r.When, m.how, r.ID)
				continue
			}
			caught++
		}
	}
	t.Logf("answer rules: %d rules, %d breakages, %d caught", len(AnswerRules), broken, caught)
	if caught != broken {
		t.Fatalf("%d of %d breakages went unnoticed", broken-caught, broken)
	}
}
