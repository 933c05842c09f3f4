package reconcile

// UploadKind is what one upload request does.
type UploadKind int

// The kinds of upload request.
const (
	UploadCreate UploadKind = iota // a file never uploaded: POST
	UploadUpdate                   // new content or path of a memory, with a content_sha256 precondition
	UploadMove                     // a memory parked at a temporary path to break a cycle of moves (no new content)
	UploadDelete                   // a delete, with a content_sha256 precondition
)

// The error codes an Answer tells apart, as the flusher names the store's
// typed errors.
const (
	CodePrecondition = "precondition_failed"  // 409: the memory's sha is not the precondition
	CodePathConflict = "path_conflict"        // 409: the path is taken, or is a directory of memories
	CodeMemoryLimit  = "memory_limit_reached" // 422: the store is at its memory cap
)

// Answer describes the store's answer to one upload: what the flusher
// reads from the store's typed error (or its success), and nothing else.
type Answer struct {
	Op UploadKind
	// Status is the HTTP status of the answer: 200 for a success, 0 when
	// no answer came (a network error, a timeout).
	Status int
	// Code tells the 409s and the 422 apart (Code… constants).
	Code string
	// HoldsSent: the memory the answer is about holds exactly the bytes
	// sent (and sits at the path asked for).
	HoldsSent bool
	// OthersMemory: a create was answered with a memory (the client took
	// it for our own create whose response was lost, R22) that is the
	// copy of another local file whose move or delete was pending when
	// the pass began ("mv a b; touch a", two empty files).
	OthersMemory bool
	// Canceled: the request was cancelled before an answer came (a
	// second signal cut the final sync short): not a failure of the store.
	Canceled bool
	// Unrecorded: the store took the upload, but the journal could not
	// record its answer.
	Unrecorded bool
}

// Verdict is what a pass does with the store's answer to one upload.
type Verdict int

// The verdicts. The zero value is no verdict: an answer no rule matched.
const (
	VerdictNone Verdict = iota
	// VerdictSettle: the store holds the change; settle the entry, the
	// answer becomes the base.
	VerdictSettle
	// VerdictRecreate: the memory is gone from the store; create it in
	// its place in the same pass (the local file is the only copy).
	VerdictRecreate
	// VerdictResolve: the store changed the memory too; after the pass's
	// uploads, fetch it and merge it (the store wins), except on an
	// unclean end.
	VerdictResolve
	// VerdictRetryPath: a path conflict; retried after the pass's other
	// changes, a cycle of moves broken by parking; then it waits.
	VerdictRetryPath
	// VerdictWaitCap: the store is at its memory cap; the create waits for
	// a sign of room.
	VerdictWaitCap
	// VerdictRefused: the store refused the content; the file stays
	// local, flagged, retried only after it changes.
	VerdictRefused
	// VerdictCredential: the store refused the credential, not the
	// content; the change stays journaled and is retried every pass.
	VerdictCredential
	// VerdictOutage: the store did not answer, or not usefully; the
	// change stays journaled and counts toward an outage.
	VerdictOutage
	// VerdictCutShort: the request was cancelled; the change stays
	// journaled, and the pass's end says whether that is an outage.
	VerdictCutShort
	// VerdictUnrecorded: the store answered but the journal could not
	// record it; retried next pass, no outage.
	VerdictUnrecorded
)

var verdictNames = [...]string{"none", "settle", "recreate", "resolve", "retry-path", "wait-cap",
	"refused", "credential", "outage", "cut-short", "unrecorded"}

func (v Verdict) String() string {
	if v < 0 || int(v) >= len(verdictNames) {
		return "verdict?"
	}
	return verdictNames[v]
}

// Pending reports whether the change stays journaled after this verdict
// (everything but a settle).
func (v Verdict) Pending() bool { return v != VerdictSettle }

// AnswerRule is one row of the answer table: when Match holds for an
// answer, Verdict is what the pass does.
type AnswerRule struct {
	// ID is the row of docs/sync.md ("The store's answer to an upload",
	// or "Deletes") the rule states.
	ID string
	// When is the condition in words, as the docs say it.
	When    string
	Match   func(Answer) bool
	Verdict Verdict
}

// AnswerRules is the table of docs/sync.md's rows R19–R27 (and the
// answers to a delete, "Deletes"), in order: the first rule that matches
// an answer decides it.
var AnswerRules = []AnswerRule{
	{ID: "R19", When: "the store took it, but the journal could not record the answer: retried next pass",
		Match: func(a Answer) bool { return a.Unrecorded }, Verdict: VerdictUnrecorded},
	{ID: "R23", When: "a create answered with the memory of another local file whose change is pending: not ours, a path conflict",
		Match: func(a Answer) bool { return a.Op == UploadCreate && a.Status == 200 && a.OthersMemory }, Verdict: VerdictRetryPath},
	{ID: "R19", When: "200",
		Match: func(a Answer) bool { return a.Status == 200 }, Verdict: VerdictSettle},
	{ID: "R22", When: "a create, or an update with a precondition, answered 409 where the memory holds exactly the bytes sent: a lost response",
		Match: func(a Answer) bool {
			return a.Status == 409 && a.HoldsSent && (a.Op == UploadCreate || a.Op == UploadUpdate)
		}, Verdict: VerdictSettle},
	{ID: "R21", When: "an update answered 404: deleted meanwhile",
		Match: func(a Answer) bool { return a.Op == UploadUpdate && a.Status == 404 }, Verdict: VerdictRecreate},
	{ID: "deletes", When: "a delete answered 404: already gone",
		Match: func(a Answer) bool { return a.Op == UploadDelete && a.Status == 404 }, Verdict: VerdictSettle},
	{ID: "R20", When: "409 precondition failed",
		Match: func(a Answer) bool { return a.Status == 409 && a.Code == CodePrecondition }, Verdict: VerdictResolve},
	{ID: "R23", When: "409 path conflict",
		Match: func(a Answer) bool { return a.Status == 409 && a.Code == CodePathConflict }, Verdict: VerdictRetryPath},
	{ID: "R24", When: "422 memory_limit_reached",
		Match: func(a Answer) bool { return a.Status == 422 && a.Code == CodeMemoryLimit }, Verdict: VerdictWaitCap},
	{ID: "R25", When: "400 or 413: invalid, too large",
		Match: func(a Answer) bool { return a.Status == 400 || a.Status == 413 }, Verdict: VerdictRefused},
	{ID: "R26", When: "401 or 403",
		Match: func(a Answer) bool { return a.Status == 401 || a.Status == 403 }, Verdict: VerdictCredential},
	{ID: "R27", When: "cancelled before an answer (a final sync cut short)",
		Match: func(a Answer) bool { return a.Canceled }, Verdict: VerdictCutShort},
	{ID: "R27", When: "network error, timeout, 429, 5xx, and any answer no row above names",
		Match: func(Answer) bool { return true }, Verdict: VerdictOutage},
}

// JudgeAnswer returns the verdict on one answer, and the rule of
// AnswerRules that gave it.
func JudgeAnswer(a Answer) (Verdict, AnswerRule) {
	return judgeWith(AnswerRules, a)
}

// judgeWith applies rules to a, first match; VerdictNone when none
// matches.
func judgeWith(rules []AnswerRule, a Answer) (Verdict, AnswerRule) {
	for _, r := range rules {
		if r.Match(a) {
			return r.Verdict, r
		}
	}
	return VerdictNone, AnswerRule{}
}
