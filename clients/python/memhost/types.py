"""Request and answer shapes of the memhost HTTP API (docs/openapi.yaml).

Answers are returned as the decoded JSON, typed with these TypedDicts, so a
record read from export can be given back to import unchanged and a field
the server adds later is kept rather than dropped.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict, Union

Kind = Literal["preference", "fact", "gotcha", "procedure", "relationship", "open_loop", "reference", "episode"]
Trust = Literal["untrusted", "agent_observed", "agent_verified", "application", "operator"]
Status = Literal["active", "superseded", "quarantined", "tombstoned"]
SkipReason = Literal[
    "per_turn_injection_off",
    "contextual_with_empty_query",
    "budget_exhausted",
    "no_records",
    "nothing_renderable",
    "recall_failed",
    "selector_empty",
]

# A string, or a list of content blocks ({"type": "text", "text": ...}, a
# tool_result, or any other block, passed through unchanged).
Content = Union[str, list[dict[str, Any]]]


class Identity(TypedDict, total=False):
    id: Required[str]
    realm: str


# Methods taking an identity also accept its id alone (the default realm).
IdentityLike = Union[str, Identity]


class Thread(TypedDict):
    id: str
    seq: int


class RecordInput(TypedDict, total=False):
    scope: Required[str]  # identity:<id>, mob:<name>, operator:<name> or realm
    kind: Required[Kind]
    title: str
    description: str
    body: str
    tags: list[str]
    trust: Trust
    expires_at: str  # RFC 3339
    thread: Thread
    occurred_at: str  # RFC 3339: when the remembered thing happened


class Record(TypedDict, total=False):
    # The server always sends the Required fields; a record given to
    # import_records may leave out its realm.
    id: Required[str]
    realm: str
    scope: Required[str]
    kind: Required[str]
    title: Required[str]
    description: str
    body: Required[str]
    tags: list[str]
    trust: Required[str]
    status: Required[Status]
    supersedes: str
    created_at: Required[str]
    updated_at: Required[str]
    expires_at: str
    content_hash: Required[str]
    use_count: Required[int]
    last_used_at: str
    thread: Thread
    occurred_at: str


class RememberResult(TypedDict):
    ids: list[str]
    # "proposed" (with a message) when an agent's shared-scope records were
    # stored as proposals awaiting approval; absent when they were stored.
    status: NotRequired[Literal["proposed"]]
    message: NotRequired[str]


class Approval(TypedDict):
    id: str  # the active record
    approved: str  # the proposal, now superseded
    status: Literal["active"]


class Hit(TypedDict):
    record: Record
    score: float


class RecallResult(TypedDict):
    hits: list[Hit]


class ManifestRow(TypedDict, total=False):
    id: Required[str]
    scope: Required[str]
    kind: Required[str]
    title: Required[str]
    description: str
    updated_at: Required[str]
    rank: Required[float]  # 0 means unranked


class ManifestResult(TypedDict):
    rows: list[ManifestRow]
    truncated: NotRequired[bool]  # a full manifest past the 50,000 rows the host reads


class TurnInjection(TypedDict):
    injected_context: list[str]
    skip_reason: SkipReason | None
    bytes: int
    record_ids: list[str]


class BuildInjection(TypedDict):
    injection: str | None
    record_ids: list[str]


class Defanged(TypedDict):
    content: Content
    hits: int


class ToolCallFunction(TypedDict):
    name: str
    arguments: str  # JSON inside a string, as OpenAI sends it


class ToolCall(TypedDict, total=False):
    id: str
    type: str
    function: Required[ToolCallFunction]


class Message(TypedDict):
    """An evicted message; beside its content, an OpenAI Chat Completions
    message's fields as a client keeps it (content null or absent: empty)."""

    role: str
    content: NotRequired[Content | None]
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    function_call: NotRequired[ToolCallFunction | None]
    refusal: NotRequired[str | None]
    tool_call_id: NotRequired[str]


class Artifact(TypedDict):
    role: Literal["user"]
    content: str


class Compaction(TypedDict):
    artifact: Artifact
    absorbed: int
    compacted: int


class GuideFilters(TypedDict, total=False):
    top_k: int
    min_score: float
    required_tags: list[str]
    excluded_tags: list[str]


class GuideBlock(TypedDict):
    block: str | None


class GuideIteration(TypedDict):
    block: str | None
    changed: bool
    recall_failed: bool  # the recall failed: block is the previous one, kept


class ExportPage(TypedDict):
    records: list[Record]
    next: str


class ImportConflict(TypedDict):
    index: int  # in the request's records
    id: str


class ImportResult(TypedDict):
    imported: int
    skipped: int
    retired: NotRequired[int]  # stored records moved on to a later status the import gave them (superseded, tombstoned)
    conflicts: NotRequired[list[ImportConflict]]  # ids the store gives another record: not imported


class ReindexProgress(TypedDict):
    done: int
    total: int


class ReindexResult(TypedDict):
    realm: str
    reindexed: int
    duration_ms: float


class PluginStatus(TypedDict, total=False):
    instance: Required[str]
    kind: Required[str]
    name: Required[str]
    version: Required[str]
    kinds: Required[list[str]]
    protocol: Required[list[int]]
    capabilities: Required[list[str]]
    healthy: Required[bool]
    state: Required[Literal["starting", "ready", "restarting", "backoff", "stopped"]]
    restarts: Required[int]
    start_failures: Required[int]
    next_attempt: str
    backoff_ms: int
    pid: int
    address: str  # a remote plugin's
    last_error: str
    warnings: list[str]  # the instance's latest warning and error lines, for the operator


class PluginsResult(TypedDict):
    plugins: list[PluginStatus]
    semantic: NotRequired[list[dict[str, Any]]]  # each realm's embedding backlog, with an embedder


class Readiness(TypedDict):
    ready: bool
    status: str  # "ready" or "not ready"
    # Plugin detail of a server that is not ready (for a valid token, or
    # when the server has no tokens).
    plugins: NotRequired[list[PluginStatus]]
