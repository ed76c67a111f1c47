// Package compaction is the host side of conversation compaction (DESIGN
// 7): per (realm, identity, conversation) it keeps a rolling summary and a
// watermark of how many evicted messages the summary has absorbed, hands a
// compactor plugin only the messages beyond the watermark with the
// previous summary as carry-over, and advances the watermark only when the
// compactor succeeded. State is persisted through a Store, so a restart
// does not compact again what was already absorbed.
package compaction

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/keyedlock"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/classify"
)

// Defaults for Options.
const (
	DefaultMaxArtifactBytes = 16 << 10
	DefaultChunkBytes       = 64 << 10
	DefaultChunkMessages    = 200
	// MaxMessages bounds one request's evicted list.
	MaxMessages = 100_000
	// MaxRoleBytes bounds a message role ("user", "assistant", "tool"...).
	MaxRoleBytes = 32
	// ArtifactRole is the role of every artifact, whatever the compactor
	// said: a summary is written from user, assistant and tool messages,
	// so it must not reach the model with more authority than they had
	// ("system" would let a user's words become instructions; see
	// docs/api.md, Compaction).
	ArtifactRole = "user"
)

// Stable error codes of a refused compaction, for the API edge. Each error
// the Service answers for these cases carries its code (see CodeOf).
const (
	CodeFailed          = "compaction_failed"
	CodeEmpty           = "compaction_empty"
	CodeTooLarge        = "compaction_too_large"
	CodeHistoryMismatch = "history_mismatch"
)

// Sentinel errors callers branch on.
var (
	// ErrNoCompactor: the deployment configures no compactor.
	ErrNoCompactor = fmt.Errorf("no compactor is configured (set coordinator.compactor): %w", sdk.ErrUnsupported)
	// ErrFailed: the compactor answered an error; it is wrapped unchanged.
	ErrFailed = errors.New("compactor failed")
	// ErrEmpty: the compactor answered an artifact with no text.
	ErrEmpty = errors.New("compactor answered an empty artifact")
	// ErrTooLarge: the compactor answered an artifact over the byte cap.
	ErrTooLarge = errors.New("compactor answered an artifact over the byte cap")
	// ErrHistoryMismatch: the evicted list does not start with the messages
	// already absorbed (shorter, or different).
	ErrHistoryMismatch = errors.New("evicted messages do not match the absorbed history")
)

// codedError gives a compaction refusal its stable code while keeping both
// the compaction sentinel and the cause reachable through errors.Is.
type codedError struct {
	code     string
	sentinel error
	cause    error
	msg      string
}

func (e *codedError) Error() string     { return e.msg }
func (e *codedError) ErrorCode() string { return e.code }

// Unwrap answers the compaction sentinel and, when there is one, the cause.
func (e *codedError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// CodeOf answers the compaction code of err, if it carries one.
func CodeOf(err error) (string, bool) {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode(), true
	}
	return "", false
}

// Resetter is told that a session was compacted (the coordinator's
// OnSessionCompacted, DESIGN 5.6).
type Resetter interface {
	OnSessionCompacted(ctx context.Context, id sdk.Identity, session string) error
}

// Renderer is what the Service needs of the coordinator to make text safe
// for a model (coordinator.Coordinator implements it).
type Renderer interface {
	// RenderText defangs and cleans a text (the summary a compactor
	// answered).
	RenderText(id sdk.Identity, s string, k coordinator.TextKind) string
	// RenderInbound is RenderText for the evicted messages a client sent
	// and their roles, each text as its kind, rendered as one run (a
	// marker split across two of them reads whole): large ones in all wait
	// their turn among the large inbound texts being defanged, within ctx.
	RenderInbound(ctx context.Context, id sdk.Identity, texts []string, kinds []coordinator.TextKind) ([]string, error)
	// RenderSummary frames a summary for delivery: escaped, inside its
	// own element, after a fixed preamble.
	RenderSummary(id sdk.Identity, s string) string
}

// EchoStripper removes injected memory from a text (the coordinator's
// StripInjected).
type EchoStripper interface {
	// StripInjected answers s without the memory envelopes this host
	// rendered for the identity in session (or without one, or for MCP
	// recall).
	StripInjected(id sdk.Identity, session, s string) string
}

// Options configure a Service.
type Options struct {
	// Compactor turns slices into artifacts; nil answers ErrNoCompactor.
	Compactor sdk.Compactor
	// Store keeps the state; nil keeps it in memory.
	Store Store
	// Resetter, when set, is told after every compaction that absorbed
	// new messages for a request naming a session.
	Resetter Resetter
	// MaxArtifactBytes caps an artifact's content (and is sent to the
	// compactor as its limit).
	MaxArtifactBytes int
	// ChunkBytes and ChunkMessages bound one compactor call; a larger
	// slice is compacted in chunks, each artifact carried into the next.
	ChunkBytes    int
	ChunkMessages int
	// Renderer makes text safe to hand a model: the evicted messages are
	// defanged before any compactor reads them, the summary is defanged
	// before it is stored, and what a request answers is framed (see
	// Renderer). nil passes text through unchanged; the host always sets
	// it.
	Renderer Renderer
	// Echoes, when set, removes the memory this host injected from an
	// evicted message before it is summarised or archived: injected
	// context is never compacted back in (DESIGN 5.1).
	Echoes EchoStripper
	// Archive, when set, keeps every absorbed message verbatim; it is
	// written before the summary commits (see Archiver).
	Archive Archiver
	Logger  hclog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service compacts conversations. It is safe for concurrent use.
type Service struct {
	opts    Options
	locks   keyedlock.Lock[Key]
	pending pendingIndex
}

// New answers a Service with opts' zero values defaulted.
func New(opts Options) *Service {
	if opts.Store == nil {
		opts.Store = NewMemoryStore()
	}
	if opts.MaxArtifactBytes <= 0 {
		opts.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	if opts.ChunkBytes <= 0 {
		opts.ChunkBytes = DefaultChunkBytes
	}
	if opts.ChunkMessages <= 0 {
		opts.ChunkMessages = DefaultChunkMessages
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{opts: opts}
}

// Enabled reports whether a compactor is configured.
func (s *Service) Enabled() bool { return s.opts.Compactor != nil }

// log is the service's logger with the attributes of the request logger
// in ctx (its request id), so a request's lines all carry its id.
func (s *Service) log(ctx context.Context) hclog.Logger {
	return s.opts.Logger.With(hclog.FromContext(ctx).ImpliedArgs()...)
}

// Request asks to compact a conversation.
type Request struct {
	Identity     sdk.Identity
	Conversation string
	// Session, when set, is reset in the coordinator after a compaction
	// that absorbed new messages.
	Session string
	// Evicted is every message evicted so far, in conversation order.
	Evicted []sdk.Message
	// Application is set for an application caller: its compaction for
	// an identity continues a conversation of the same id stored before
	// identities were recorded (Key.Identity ""), which then becomes that
	// identity's. An agent never reaches such a state.
	Application bool
}

// Access says whose conversations a caller forgets.
type Access struct {
	// Identity is the identity the caller acts as: only its state of the
	// conversation id is forgotten.
	Identity string
	// Application, with no Identity, forgets the conversation id for every
	// identity of the realm, states stored before identities were
	// recorded included.
	Application bool
}

// Result is the conversation's summary after the call.
type Result struct {
	Artifact sdk.Message `json:"artifact"`
	// Absorbed is the watermark: evicted messages the artifact covers.
	Absorbed int `json:"absorbed"`
	// Compacted is how many of them this call compacted (0 for a retry).
	Compacted int `json:"compacted"`
	// Calls is how many compactor calls this call made (chunks).
	Calls int `json:"calls"`
}

// ValidateConversation checks a conversation id: the rules of a session key.
func ValidateConversation(id string) error {
	if err := coordinator.ValidateSessionKey(id); err != nil {
		var fe *sdk.FieldError
		if errors.As(err, &fe) {
			return &sdk.FieldError{Field: "conversation", Problem: fe.Problem, Err: fe.Err}
		}
		return err
	}
	return nil
}

func validate(req *Request) error {
	if err := req.Identity.Validate(); err != nil {
		return err
	}
	if err := ValidateConversation(req.Conversation); err != nil {
		return err
	}
	if req.Session != "" {
		if err := coordinator.ValidateSessionKey(req.Session); err != nil {
			return err
		}
	}
	if len(req.Evicted) > MaxMessages {
		return &sdk.FieldError{Field: "evicted", Problem: fmt.Sprintf("holds %d messages, the limit is %d", len(req.Evicted), MaxMessages), Err: sdk.ErrTooLarge}
	}
	for i, m := range req.Evicted {
		field := fmt.Sprintf("evicted[%d]", i)
		switch {
		case m.Role == "":
			return &sdk.FieldError{Field: field + ".role", Problem: "must not be empty", Err: sdk.ErrInvalid}
		case len(m.Role) > MaxRoleBytes:
			return &sdk.FieldError{Field: field + ".role", Problem: fmt.Sprintf("is %d bytes, the limit is %d", len(m.Role), MaxRoleBytes), Err: sdk.ErrInvalid}
		case !utf8.ValidString(m.Role) || !utf8.ValidString(m.Content):
			return &sdk.FieldError{Field: field, Problem: "is not valid UTF-8", Err: sdk.ErrInvalid}
		}
	}
	return nil
}

// Compact absorbs the evicted messages beyond the watermark into the
// conversation's summary and answers it. A request that brings nothing new
// (a retry, or the second of two concurrent requests) answers the stored
// summary without calling the compactor. On any failure nothing changes.
func (s *Service) Compact(ctx context.Context, req Request) (_ Result, err error) {
	if s.opts.Compactor == nil {
		return Result{}, ErrNoCompactor
	}
	if err := validate(&req); err != nil {
		return Result{}, err
	}
	key := Key{Realm: req.Identity.Realm, Identity: req.Identity.ID, Conversation: req.Conversation}
	// One compaction per conversation at a time: a concurrent request for
	// the same conversation waits, then finds the watermark moved and
	// answers the first one's summary (singleflight per key, but a request
	// that carries more messages still gets them absorbed).
	// From here on ctx is the hold's: it ends should the hold be lost,
	// so nothing is archived or saved after another host took it.
	ctx, release, err := s.hold(ctx, key)
	if err != nil {
		return Result{}, err
	}
	defer release()
	defer func() { err = holdLost(ctx, req.Conversation, "compaction", "nothing was absorbed", err) }()
	began := s.opts.Now()

	st, found, err := s.opts.Store.Load(ctx, key)
	if err != nil {
		return Result{}, err
	}
	// loaded is where st came from: key, or a state stored before
	// identities were recorded that an application's call adopts.
	loaded := key
	if !found && req.Application {
		legacy := Key{Realm: key.Realm, Conversation: key.Conversation}
		held, releaseLegacy, err := s.hold(ctx, legacy)
		if err != nil {
			return Result{}, err
		}
		defer releaseLegacy()
		ctx = held
		if st, found, err = s.opts.Store.Load(ctx, legacy); err != nil {
			return Result{}, err
		}
		if found {
			loaded = legacy
		}
	}
	// A reset an earlier call owes is made before anything else: this
	// call's answer is a success only once every reset it covers is done.
	if found && !st.Pending.IsZero() && s.opts.Resetter != nil {
		if err := s.completeReset(ctx, loaded, &st); err != nil {
			return Result{}, err
		}
	}
	if len(req.Evicted) < st.Watermark {
		return Result{}, s.mismatch(req.Conversation, fmt.Sprintf("the summary has absorbed %d messages but the request lists %d; send every message evicted so far, or DELETE the conversation to start over", st.Watermark, len(req.Evicted)))
	}
	if found {
		prefix := req.Evicted[:st.Watermark]
		if h := hashChain("", prefix); h != st.PrefixHash {
			if hashChain("", nameOnTheBlocksLine(prefix)) != st.PrefixHash {
				return Result{}, s.mismatch(req.Conversation, fmt.Sprintf("the first %d evicted messages differ from the ones the summary absorbed; DELETE the conversation to start over", st.Watermark))
			}
			st.PrefixHash = h // the chain goes on in today's text
		}
	}
	slice := req.Evicted[st.Watermark:]
	if len(slice) == 0 {
		if !found {
			return Result{}, &sdk.FieldError{Field: "evicted", Problem: "lists no messages: there is nothing to compact", Err: sdk.ErrInvalid}
		}
		// A summary stored before it was defanged on the way in is
		// defanged on the way out; defanging is idempotent.
		return Result{Artifact: s.deliver(req.Identity, st.Artifact), Absorbed: st.Watermark}, nil
	}

	var carry *sdk.Message
	if found && st.Artifact.Content != "" {
		// Rendered again: a summary stored by an earlier version was
		// defanged by weaker rules.
		prev := s.safe(req.Identity, st.Artifact)
		carry = &prev
	}
	eps, err := s.absorbable(ctx, req, st.Watermark, slice)
	if err != nil {
		return Result{}, err
	}
	msgs := make([]sdk.Message, len(eps))
	for i, ep := range eps {
		msgs[i] = ep.Message
	}
	chunks, err := s.chunks(ctx, req.Identity, msgs)
	if err != nil {
		return Result{}, err
	}
	start := st.Watermark
	// Each call's key names its place in the conversation, the history
	// before its chunk included: the same messages evicted again later
	// are a new call, not a retry of the first.
	at := st.PrefixHash
	for i, chunk := range chunks {
		art, err := s.call(ctx, req.Identity, key, at, chunk, carry, i, len(chunks))
		if err != nil {
			s.log(ctx).Warn("compaction failed; watermark kept", "realm", key.Realm, "conversation", key.Conversation,
				"watermark", st.Watermark, "chunk", i+1, "chunks", len(chunks), "duration_ms", s.opts.Now().Sub(began).Milliseconds(), "error", err)
			return Result{}, err
		}
		carry = &art
		at = hashChain(at, chunk)
	}
	if carry == nil {
		// Nothing to summarise (the slice was injected memory only) and
		// no summary yet: the watermark moves past it all the same.
		carry = &sdk.Message{Role: ArtifactRole}
	}
	next := State{
		Watermark:  st.Watermark + len(slice),
		PrefixHash: hashChain(st.PrefixHash, slice),
		Artifact:   *carry,
		UpdatedAt:  s.opts.Now().UTC(),
	}
	// An adopted state is new under key: it is created, not advanced.
	prev := st.Watermark
	if loaded != key {
		prev = 0
	}
	// A hold lost during the compactor's calls, which a compactor may
	// not notice, stops the compaction here.
	if err := context.Cause(ctx); err != nil {
		return Result{}, err
	}
	// The archive is written before the summary commits: a host killed
	// between the two has committed nothing, and the retry compacts and
	// archives the same slice again, which stores nothing twice.
	if s.opts.Archive != nil {
		if err := s.opts.Archive.Archive(ctx, req.Identity, req.Conversation, st.Watermark, next.Watermark, eps); err != nil {
			s.log(ctx).Warn("archiving failed; watermark kept", "realm", key.Realm, "conversation", key.Conversation,
				"watermark", st.Watermark, "error", err)
			return Result{}, err
		}
	}
	if err := context.Cause(ctx); err != nil {
		return Result{}, err
	}
	if err := s.save(ctx, req, key, prev, &next); err != nil {
		if errors.Is(err, ErrStale) {
			return Result{}, fmt.Errorf("conversation %s was compacted by another host meanwhile; retry: %w: %w", req.Conversation, err, sdk.ErrConflict)
		}
		return Result{}, err
	}
	// What follows the commit is the host's to finish, not the client's:
	// a client gone once the summary committed would leave episodes no
	// later compaction goes back for.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCommitTimeout)
	defer cancel()
	if s.opts.Archive != nil {
		// Committed: the positions past the retention go, the slice's own
		// and the earlier ones it pushed out (not before: a compaction
		// that fails must leave the archive as it was). A failure leaves
		// them below the watermark, where a DELETE of the conversation
		// still reaches them.
		if err := s.opts.Archive.Retain(ctx, req.Identity, req.Conversation, st.Watermark, next.Watermark); err != nil {
			s.log(ctx).Warn("archive retention after the summary failed; the episodes stay until the conversation is deleted", "realm", key.Realm, "conversation", key.Conversation, "error", err)
		}
	}
	if loaded != key {
		// The adopted state now lives under key. A failure here leaves the
		// old copy, which only an application reaches (as before the
		// upgrade); its DELETE naming no identity removes it.
		if err := s.opts.Store.Delete(ctx, loaded); err != nil {
			s.log(ctx).Warn("the adopted conversation state was not removed", "realm", key.Realm, "conversation", key.Conversation, "error", err)
		}
	}
	s.log(ctx).Info("compacted", "realm", key.Realm, "conversation", key.Conversation, "from", start, "to", next.Watermark,
		"messages", len(slice), "chunks", len(chunks), "duration_ms", s.opts.Now().Sub(began).Milliseconds())
	return Result{Artifact: s.deliver(req.Identity, next.Artifact), Absorbed: next.Watermark, Compacted: len(slice), Calls: len(chunks)}, nil
}

// afterCommitTimeout bounds the clean-up after a summary commits (the
// archive's retention, an adopted state's old copy), which goes on when
// the client has gone.
const afterCommitTimeout = 10 * time.Second

// save stores next and resets the request's session as one unit: in one
// transaction when the store holds the sessions too, else by recording
// the reset with the summary and then making it. Any failure is answered;
// a reset recorded but not made is completed by the next compaction of
// the conversation or the session's next turn.
func (s *Service) save(ctx context.Context, req Request, key Key, prev int, next *State) error {
	if req.Session == "" || s.opts.Resetter == nil {
		return s.opts.Store.Save(ctx, key, prev, *next)
	}
	if tx, ok := s.opts.Store.(TxStore); ok {
		err := tx.SaveWith(ctx, key, prev, *next, func(ctx context.Context) error {
			return s.opts.Resetter.OnSessionCompacted(resetting(ctx), req.Identity, req.Session)
		})
		if err != nil && !errors.Is(err, ErrStale) {
			return fmt.Errorf("conversation %s: the summary and the reset of session %s failed together, nothing changed; retry: %w", req.Conversation, req.Session, err)
		}
		return err
	}
	next.Pending = PendingReset{Identity: req.Identity.ID, Session: req.Session}
	if err := s.opts.Store.Save(ctx, key, prev, *next); err != nil {
		return err
	}
	s.pending.add(key, next.Pending)
	return s.completeReset(ctx, key, next)
}

func (s *Service) mismatch(conversation, why string) error {
	return &codedError{code: CodeHistoryMismatch, sentinel: ErrHistoryMismatch, cause: sdk.ErrConflict,
		msg: fmt.Sprintf("conversation %s: %s", conversation, why)}
}

// call runs one compactor call and checks its artifact.
func (s *Service) call(ctx context.Context, id sdk.Identity, key Key, at string, chunk []sdk.Message, carry *sdk.Message, i, n int) (sdk.Message, error) {
	where := fmt.Sprintf("conversation %s", key.Conversation)
	if n > 1 {
		where += fmt.Sprintf(" (chunk %d of %d)", i+1, n)
	}
	art, err := s.opts.Compactor.Compact(ctx, sdk.CompactRequest{
		ConversationID: key.Conversation,
		Evicted:        chunk,
		CarryOver:      carry,
		IdempotencyKey: IdempotencyKey(key, at, chunk),
		MaxBytes:       s.opts.MaxArtifactBytes,
	})
	if err != nil {
		// Deadline and unavailability keep their own codes (504, 503):
		// they say "try again", where a compactor error says "broken". A
		// call canceled with its request (the client gone) is no
		// compactor error either.
		if errors.Is(err, sdk.ErrDeadline) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sdk.ErrUnavailable) || errors.Is(err, context.Canceled) {
			return sdk.Message{}, fmt.Errorf("%s: compactor: %w", where, err)
		}
		return sdk.Message{}, &codedError{code: CodeFailed, sentinel: ErrFailed, cause: err,
			msg: fmt.Sprintf("%s: compactor failed (%s): %v", where, sdk.CodeOf(err), err)}
	}
	if !sdk.HasVisibleText(art.Content) {
		return sdk.Message{}, &codedError{code: CodeEmpty, sentinel: ErrEmpty,
			msg: fmt.Sprintf("%s: the compactor answered an empty artifact; the watermark stays", where)}
	}
	if len(art.Content) > s.opts.MaxArtifactBytes {
		return sdk.Message{}, &codedError{code: CodeTooLarge, sentinel: ErrTooLarge, cause: sdk.ErrTooLarge,
			msg: fmt.Sprintf("%s: the compactor answered %d bytes, over the %d-byte artifact cap; the watermark stays", where, len(art.Content), s.opts.MaxArtifactBytes)}
	}
	// The cap is checked first: it is the compactor's limit, and defanging
	// grows a text by a few bytes per neutralised marker.
	return s.safe(id, art), nil
}

// safe answers the artifact as it is stored (so the carry-over a
// compactor reads is safe too): defanged, with controls replaced, in the
// role ArtifactRole.
func (s *Service) safe(id sdk.Identity, art sdk.Message) sdk.Message {
	if s.opts.Renderer != nil {
		art.Content = s.opts.Renderer.RenderText(id, art.Content, coordinator.TextSummary)
	}
	art.Role = ArtifactRole
	return art
}

// deliver answers a stored artifact as a model receives it: rendered like
// a stored one, and framed as a summary whatever the compactor wrote, so
// that nothing in it reads as the prompt's own instructions.
func (s *Service) deliver(id sdk.Identity, art sdk.Message) sdk.Message {
	if s.opts.Renderer != nil {
		art.Content = s.opts.Renderer.RenderSummary(id, art.Content)
	}
	art.Role = ArtifactRole
	return art
}

// absorbable answers the slice's messages as a compactor may read them
// and the archive keeps them, each with its position: without the memory
// this host injected (a message that held nothing else is left out), and
// defanged, since a forged marker or header in an evicted message would
// otherwise be copied into the summary, which goes back to the model on
// every later turn. The watermark's hash covers the messages as sent, not
// these.
func (s *Service) absorbable(ctx context.Context, req Request, start int, slice []sdk.Message) ([]Episode, error) {
	out := make([]Episode, 0, len(slice))
	for i, m := range slice {
		if s.opts.Echoes != nil {
			if stripped := s.opts.Echoes.StripInjected(req.Identity, req.Session, m.Content); stripped != m.Content {
				// The line breaks that joined the memory to the rest go
				// with it.
				if m.Content = strings.TrimSpace(stripped); m.Content == "" {
					continue
				}
			}
		}
		out = append(out, Episode{Seq: start + i, Message: m})
	}
	if s.opts.Renderer == nil {
		return out, nil
	}
	// A compactor writes each message's role and content next to one
	// another, and the next message after it, with punctuation between
	// ("[role] text" lines, "- role: text"), so they are rendered as one
	// run: a role and the content after it, or a content and the next
	// role, can spell a marker neither holds alone. The run is read twice:
	// with the roles as letters between the contents, and without them,
	// as a reader that takes a bracketed label for markup reads the
	// lines. A role a chat API defines is left out of both.
	var withRoles, contents []*string
	var kinds []coordinator.TextKind
	for i := range out {
		m := &out[i].Message
		if !chatRoles[strings.ToLower(m.Role)] {
			withRoles, kinds = append(withRoles, &m.Role), append(kinds, coordinator.TextLabel)
		}
		withRoles, kinds = append(withRoles, &m.Content), append(kinds, coordinator.TextSummary)
		contents = append(contents, &m.Content)
	}
	if err := s.render(ctx, req.Identity, withRoles, kinds); err != nil {
		return nil, err
	}
	if err := s.renderInbound(ctx, req.Identity, contents); err != nil {
		return nil, err
	}
	for i := range out {
		if m := &out[i].Message; strings.TrimSpace(m.Role) == "" {
			// A marker that began in the content before took the whole
			// role; a compactor refuses a message without one.
			m.Role = "message"
		}
	}
	return out, nil
}

// chatRoles are the roles chat APIs define. Such a role is a label, not
// text, and is handed on as sent: rendered as text, "system" reads as a
// forged role header and is marked, and a compactor could no longer tell
// an operator's instructions from a tool's output.
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true, "human": true}

// renderInbound renders the texts contents point to, in place, as inbound
// text, together: many messages each under the inbound gate's size are as
// costly as one over it, and a marker split across two of them reads
// whole.
func (s *Service) renderInbound(ctx context.Context, id sdk.Identity, contents []*string) error {
	kinds := make([]coordinator.TextKind, len(contents))
	for i := range kinds {
		kinds[i] = coordinator.TextSummary
	}
	return s.render(ctx, id, contents, kinds)
}

// render renders the texts fields point to, in place, as inbound text of
// their kinds, as one run (Renderer.RenderInbound).
func (s *Service) render(ctx context.Context, id sdk.Identity, fields []*string, kinds []coordinator.TextKind) error {
	texts := make([]string, len(fields))
	for i, f := range fields {
		texts[i] = *f
	}
	texts, err := s.opts.Renderer.RenderInbound(ctx, id, texts, kinds)
	if err != nil {
		return err
	}
	for i, f := range fields {
		*f = texts[i]
	}
	return nil
}

// chunks splits a slice into compactor calls of at most ChunkMessages
// messages and about ChunkBytes bytes. A single message over ChunkBytes is
// split into parts of the same role, so no call is ever unbounded.
func (s *Service) chunks(ctx context.Context, id sdk.Identity, slice []sdk.Message) ([][]sdk.Message, error) {
	var out [][]sdk.Message
	var cur []sdk.Message
	size := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
			cur, size = nil, 0
		}
	}
	for _, m := range slice {
		parts := splitMessage(m, s.opts.ChunkBytes)
		if len(parts) > 1 && s.opts.Renderer != nil {
			// A cut may fall inside what defanging wrote (after
			// "defanged-", after a line's "[defanged] "), leaving the next
			// part to start with a live marker.
			contents := make([]*string, len(parts))
			for i := range parts {
				contents[i] = &parts[i].Content
			}
			if err := s.renderInbound(ctx, id, contents); err != nil {
				return nil, err
			}
		}
		for _, part := range parts {
			n := len(part.Role) + len(part.Content)
			if len(cur) > 0 && (size+n > s.opts.ChunkBytes || len(cur) >= s.opts.ChunkMessages) {
				flush()
			}
			cur = append(cur, part)
			size += n
		}
	}
	flush()
	return out, nil
}

// splitMessage cuts m's content into parts of at most max bytes, on UTF-8
// boundaries, each marked with its position. A part that begins inside a
// quoted block (a tool result, a document: Flatten) begins with the
// block's opening, its mark on a line of its own: read alone, its lines
// would otherwise be the speaker's own words.
func splitMessage(m sdk.Message, max int) []sdk.Message {
	if len(m.Role)+len(m.Content) <= max {
		return []sdk.Message{m}
	}
	const markRoom = 32 // " (part 12 of 34)" and the role
	step := max - markRoom - len(m.Role)
	runs := quotedRuns(m.Content)
	var parts, opens []string
	for at := 0; at < len(m.Content); {
		open, quoted := runs(at)
		n := step - len(open)
		if n < 64 {
			n = 64
		}
		cut := min(at+n, len(m.Content))
		for cut < len(m.Content) && !utf8.RuneStart(m.Content[cut]) {
			cut--
		}
		if quoted {
			// The mark's own line: after it, the block's opening begins one.
			open = "\n" + open
		} else {
			open = " "
		}
		parts, opens = append(parts, m.Content[at:cut]), append(opens, open)
		at = cut
	}
	out := make([]sdk.Message, len(parts))
	for i, p := range parts {
		out[i] = sdk.Message{Role: m.Role, Content: fmt.Sprintf("(part %d of %d)%s%s", i+1, len(parts), opens[i], p)}
	}
	return out
}

// quotedRuns reads text's lines as sdk/classify does (a quoted block opens
// at a line classify.QuotedRun accepts and goes on over indented lines)
// and answers a function telling whether a part beginning at a byte
// offset begins inside a block, and what it must begin with to read as it
// does in the whole text: nothing at the block's opening line, else the
// opening of the block it is inside, marked as continued.
func quotedRuns(text string) func(at int) (open string, quoted bool) {
	type run struct{ start, end, body int } // lines [start, end) of a block whose first line ends at body
	var runs []run
	open := -1
	for start := 0; start <= len(text); {
		end := strings.IndexByte(text[start:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += start
		}
		line := text[start:end]
		switch {
		case classify.QuotedRun(line):
			if open >= 0 {
				runs[open].end = start
			}
			runs = append(runs, run{start: start, end: len(text), body: end})
			open = len(runs) - 1
		case open >= 0 && line != "" && (line[0] == ' ' || line[0] == '\t'):
			// the block's further line
		case open >= 0:
			runs[open].end = start
			open = -1
		}
		start = end + 1
	}
	return func(at int) (string, bool) {
		// The last block opening at or before at.
		i := sort.Search(len(runs), func(i int) bool { return runs[i].start > at }) - 1
		switch {
		case i < 0 || at >= runs[i].end:
			return "", false
		case at == runs[i].start:
			return "", true
		}
		line := text[runs[i].start:runs[i].body]
		mark := line[:strings.IndexByte(line, ']')+1]
		if len(mark) > maxBlockMark {
			// Each part of the block begins with it: a mark as long as
			// the message made the parts' bytes quadratic in it (a
			// 512 KiB message took 6.6 GB and 33 s of CPU). Cut, it
			// still opens a block (classify.QuotedRun).
			mark = sdk.CutText(mark, maxBlockMark-1) + "]"
		}
		return mark + " (continued) ", true
	}
}

// maxBlockMark bounds the opening mark ("[tool call: search]", "[document]")
// that quotedRuns repeats at the start of each part of a block.
const maxBlockMark = 256

// Forget deletes a conversation's summary, watermark and archive; the
// next compaction starts from nothing. It forgets the state of the
// identity access names (Identity), or, for an application naming none,
// the state of every identity that holds one under the conversation id.
// Forgetting an unknown conversation is not an error.
func (s *Service) Forget(ctx context.Context, realm, conversation string, access Access) error {
	if err := sdk.ValidateRealm(realm); err != nil {
		return err
	}
	if err := ValidateConversation(conversation); err != nil {
		return err
	}
	if access.Identity != "" || !access.Application {
		if err := (sdk.Identity{Realm: realm, ID: access.Identity}).Validate(); err != nil {
			return err
		}
		return s.forget(ctx, Key{Realm: realm, Identity: access.Identity, Conversation: conversation})
	}
	// Listed again until none is left: a compaction under way may move a
	// state stored before identities were recorded to its identity's key
	// while the first list is forgotten.
	for range maxForgetPasses {
		ids, err := s.opts.Store.Identities(ctx, realm, conversation)
		if err != nil || len(ids) == 0 {
			return err
		}
		for _, id := range ids {
			if err := s.forget(ctx, Key{Realm: realm, Identity: id, Conversation: conversation}); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("conversation %s was compacted again while it was forgotten; retry: %w", conversation, sdk.ErrConflict)
}

// maxForgetPasses bounds the lists an application's forget of every
// identity's conversation makes.
const maxForgetPasses = 4

// forget deletes key's state and archive. Without a state, the episodes a
// first compaction archived and never committed are still removed: their
// ids carry the identity, so they are the caller's own.
func (s *Service) forget(ctx context.Context, key Key) (err error) {
	ctx, release, err := s.hold(ctx, key)
	if err != nil {
		return err
	}
	defer release()
	defer func() { err = holdLost(ctx, key.Conversation, "delete", "it may be partly forgotten", err) }()
	st, found, err := s.opts.Store.Load(ctx, key)
	if err != nil {
		return err
	}
	// The archive goes first: when it cannot be removed the summary
	// stays, so the DELETE's retry still knows how far it reached.
	if s.opts.Archive != nil {
		if err := s.opts.Archive.Forget(ctx, sdk.Identity{Realm: key.Realm, ID: key.Identity}, key.Conversation, st.Watermark); err != nil {
			return err
		}
	}
	if !found {
		return nil
	}
	if err := s.opts.Store.Delete(ctx, key); err != nil {
		return err
	}
	// The pending reset goes with the summary it was owed for.
	if !st.Pending.IsZero() {
		s.pending.remove(key, st.Pending)
	}
	return nil
}

// hold takes key for one compaction or forget at a time: on this host,
// and across hosts when the store is shared (Holder), since another
// host's compaction would archive its history over this one's before its
// save failed, or after a forget that answered the conversation gone.
// held is ctx, ended also should a shared store's hold be lost.
func (s *Service) hold(ctx context.Context, key Key) (context.Context, func(), error) {
	unlock, err := s.lock(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("conversation %s: waiting for a compaction under way: %w", key.Conversation, err)
	}
	h, ok := s.opts.Store.(Holder)
	if !ok {
		return ctx, unlock, nil
	}
	held, let, err := h.Hold(ctx, key)
	if err != nil {
		unlock()
		// The holder says whether it waited for another host or could not
		// ask (the database out of reach).
		return nil, nil, fmt.Errorf("conversation %s: %w", key.Conversation, err)
	}
	return held, func() { let(); unlock() }, nil
}

// holdLost answers, for a compaction or forget that failed with err
// under held, a conflict saying its hold was lost when that is why held
// ended (the writes it had not made are refused with it), else err.
func holdLost(held context.Context, conversation, what, outcome string, err error) error {
	cause := context.Cause(held)
	if err == nil || !errors.Is(cause, ErrHoldLost) {
		return err
	}
	return fmt.Errorf("conversation %s: the %s stopped: %w; %s, retry: %w", conversation, what, cause, outcome, sdk.ErrConflict)
}

// IdempotencyKey is the key every compactor call carries: realm,
// identity, conversation id and the sha256 of the slice chained on at, the hash of
// everything before it (hashChain; "" at the start), so a side-effecting
// compactor can recognise a retry of the same call, and the same messages
// at another place in the conversation are another call.
func IdempotencyKey(key Key, at string, slice []sdk.Message) string {
	return key.Realm + "/" + key.Identity + "/" + key.Conversation + "/sha256:" + hashChain(at, slice)
}

// lock holds key's lock within ctx; a wait that ends with ctx is a
// deadline.
func (s *Service) lock(ctx context.Context, key Key) (func(), error) {
	unlock, err := s.locks.Lock(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, sdk.ErrDeadline)
	}
	return unlock, nil
}

// nameOnTheBlocksLine answers msgs in the text FlattenChat gave a named
// message opening with a quoted block before the name got a line of its
// own ("bob: [tool result] …", now "bob:\n[tool result] …"), so that a
// conversation absorbed then still matches its hash chain; msgs is not
// changed. Every message whose first line ends in a colon before a block
// is taken so: a conversation that holds such a message of its own
// besides one named is refused as a mismatch, as before.
func nameOnTheBlocksLine(msgs []sdk.Message) []sdk.Message {
	out := slices.Clone(msgs)
	for i := range out {
		c := out[i].Content
		if nl := strings.IndexByte(c, '\n'); nl > 0 && c[nl-1] == ':' && strings.HasPrefix(c[nl+1:], "[") {
			out[i].Content = c[:nl] + " " + c[nl+1:]
		}
	}
	return out
}

// hashChain extends prev (hex, "" for the start) over msgs one message at
// a time, so the chain over a list equals the chain over its prefix
// extended by the rest. Fields are length-prefixed, so no two different
// lists hash alike by concatenation.
func hashChain(prev string, msgs []sdk.Message) string {
	var n [8]byte
	for _, m := range msgs {
		h := sha256.New()
		h.Write([]byte(prev))
		for _, f := range []string{m.Role, m.Content} {
			binary.BigEndian.PutUint64(n[:], uint64(len(f)))
			h.Write(n[:])
			h.Write([]byte(f))
		}
		prev = hex.EncodeToString(h.Sum(nil))
	}
	return prev
}
