"""The memhost HTTP API client (standard library only)."""

from __future__ import annotations

import email.message
import functools
import http.client
import ipaddress
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, TypeVar, cast

from .errors import MemhostError, MemhostTransportError, error_from_body, error_from_response, retry_after_seconds
from .types import (
    Approval,
    BuildInjection,
    Compaction,
    Content,
    Defanged,
    ExportPage,
    GuideBlock,
    GuideFilters,
    GuideIteration,
    Identity,
    IdentityLike,
    ImportResult,
    ManifestResult,
    Message,
    PluginsResult,
    Readiness,
    RecallResult,
    Record,
    RecordInput,
    ReindexProgress,
    ReindexResult,
    RememberResult,
    TurnInjection,
)

__all__ = ["Client", "OPERATIONS", "NOT_COVERED", "DEFAULT_URL", "DEFAULT_TIMEOUT"]

DEFAULT_URL = "http://127.0.0.1:7077"
# Seconds. The server's own request timeout is 30 s; a little more lets its
# deadline_exceeded answer arrive before the client gives up.
DEFAULT_TIMEOUT = 35.0

# Bytes of an error answer read beyond what its request can have made it:
# the API's error quotes what the request sent (a refused scope, a path), at
# most some 5 bytes for each byte sent once escaped; a longer body (a proxy's
# page) is not the API's, and only its first bytes are kept.
_ERROR_BODY_BYTES = 64 << 10
_ERROR_BODY_PER_SENT_BYTE = 8

# Bytes of one reindex line, its newline not counted: the server's lines
# (progress, the result, an error) are a few hundred bytes.
_MAX_LINE_BYTES = 1 << 20

# The API operation (its operationId in docs/openapi.yaml, or "METHOD /path"
# for one without) each method performs. The tests compare this table with
# the document, so an operation the client lacks fails them.
OPERATIONS: dict[str, str] = {}

# Documented operations this client leaves to other tools, and why.
NOT_COVERED: dict[str, str] = {
    "mcp": "JSON-RPC for Model Context Protocol clients: use an MCP SDK against /mcp",
}

F = TypeVar("F", bound=Callable[..., Any])


def _operation(key: str) -> Callable[[F], F]:
    def register(fn: F) -> F:
        OPERATIONS[key] = fn.__name__
        return fn

    return register


def _identity(identity: IdentityLike) -> Identity:
    return {"id": identity} if isinstance(identity, str) else identity


def _seg(value: str) -> str:
    """A path segment: every reserved character escaped, "/" included."""
    return urllib.parse.quote(value, safe="")


def _encode(body: Any) -> bytes:
    """A request body as UTF-8 JSON. A lone surrogate (text cut inside a
    pair, or decoded with surrogateescape) has no UTF-8: the body is then
    sent with every non-ASCII character escaped, as JSON.stringify sends
    it, and the server's invalid_argument names the field holding it."""
    text = json.dumps(body, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body).encode("ascii")


def _drop_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses redirects: memhost answers none, and following one would send
    the bearer token to whatever host the Location names (and turn a POST
    into a GET). The 3xx is raised as an error instead."""

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: email.message.Message, newurl: str
    ) -> None:
        return None


class _Deadline:
    """A call's deadline: when it passes, a timer shuts the call's socket
    down, so a server that answers a byte at a time (each wait for data
    shorter than the socket timeout) cannot hold the caller past it.
    restart() gives a streamed answer a new period."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._timer: threading.Timer | None = None
        self.restart()

    def restart(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()

    def stop(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.expired:
                self._shutdown()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _WatchedConnection(http.client.HTTPConnection):
    """A connection whose socket its call's deadline watches."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()
        self._deadline.watch(self.sock)


class _WatchedTLSConnection(_WatchedConnection, http.client.HTTPSConnection):
    """_WatchedConnection over TLS: its connect() runs HTTPSConnection's,
    whose TLS socket takes the plain one's descriptor, leaving the plain
    one closed, so the deadline watches the TLS one (shutting the plain one
    down would stop nothing)."""


class _WatchedHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(functools.partial(_WatchedConnection, deadline=self._deadline), req, **kwargs)


class _WatchedTLSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(functools.partial(_WatchedTLSConnection, deadline=self._deadline), req, **kwargs)


class _ProxyHandler(urllib.request.ProxyHandler):
    """The environment's proxies (http_proxy, https_proxy, no_proxy), never
    for a server on this machine's loopback: a proxy would reach its own
    loopback, not this one's, and be handed the bearer token on the way.
    Go's net/http passes over loopback the same way."""

    def proxy_open(self, req: Any, proxy: str, type: str) -> Any:  # noqa: A002
        if _loopback(req.host):
            return None  # the next handler opens it directly
        return super().proxy_open(req, proxy, type)


def _loopback(netloc: str) -> bool:
    host = urllib.parse.urlsplit("//" + netloc).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """An opener whose connections' sockets the deadline watches."""
    return urllib.request.build_opener(_NoRedirect, _ProxyHandler(), _WatchedHandler(deadline), _WatchedTLSHandler(deadline))


class Client:
    """A client of one memhost server.

    `timeout` (seconds) bounds every call, answer included (reindex: each
    streamed line), so a stalled or trickling server or network raises
    MemhostTransportError(timed_out=True) rather than hanging. Nothing
    touches the network before the first call.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        new_request_id: Callable[[], str] | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if token is not None:
            # Surrounding whitespace (a token file's newline) goes, as fetch
            # drops it; any other character a header cannot carry is refused
            # here, where the message can leave the token out (http.client's
            # would quote it).
            token = token.strip()
            if not all(" " <= c <= "~" for c in token):
                raise ValueError("token has a character other than printable ASCII")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._new_request_id = new_request_id or (lambda: uuid.uuid4().hex)
        self.last_request_id: str | None = None

    def with_options(self, *, token: str | None = None, timeout: float | None = None) -> Client:
        """A client sharing this one's server with another token or timeout."""
        return Client(
            self.base_url,
            token if token is not None else self.token,
            timeout=timeout if timeout is not None else self.timeout,
            new_request_id=self._new_request_id,
        )

    # --- transport -------------------------------------------------------

    def _open(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str | None] | None = None,
        accept: tuple[int, ...] = (),
    ) -> tuple[http.client.HTTPResponse | urllib.error.HTTPError, str, _Deadline]:
        """Sends a request; answers the open response, its request id and the
        call's deadline (running until the answer is read: stop it then).

        A status >= 400 outside `accept` raises the API's error."""
        url = self.base_url + path
        # An empty target is a value: the reviewer saw the proposal replace no record.
        params = {k: v for k, v in (query or {}).items() if v or (k == "target" and v == "")}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        request_id = self._new_request_id()
        self.last_request_id = request_id
        headers = {"Accept": "application/json", "X-Request-Id": request_id}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        data = None
        if body is not None:
            data = _encode(body)
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        error_limit = _ERROR_BODY_BYTES + _ERROR_BODY_PER_SENT_BYTE * (len(url) + len(data or b""))
        deadline = _Deadline(self.timeout)
        try:
            resp = _opener(deadline).open(req, timeout=self.timeout)
            if deadline.expired:
                resp.close()
                raise MemhostTransportError(f"{method} {path}: timed out", request_id, True)
            # The server's id: its own when it found the one sent unusable.
            answered = resp.headers.get("X-Request-Id") or request_id
            self.last_request_id = answered
            return resp, answered, deadline
        except urllib.error.HTTPError as e:
            answered = e.headers.get("X-Request-Id") or request_id
            self.last_request_id = answered
            if e.code in accept:
                return e, answered, deadline
            deadline.stop()
            if 300 <= e.code < 400:
                e.close()
                where = e.headers.get("Location") or "elsewhere"
                raise MemhostError(e.code, "unknown", f"{method} {path}: HTTP {e.code} redirect to {where} not followed", answered) from None
            with e:
                raw = self._read(e, method, path, answered, deadline, error_limit)
            raise error_from_response(e.code, raw, answered, retry_after_seconds(e.headers.get("Retry-After"))) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            deadline.stop()
            raise self._transport(e, method, path, request_id, deadline) from e
        except BaseException:
            deadline.stop()
            raise

    def _read(self, resp: Any, method: str, path: str, request_id: str, deadline: _Deadline, limit: int = -1) -> bytes:
        """Reads the whole answer (its first `limit` bytes when limit >= 0);
        one cut short by the deadline is a timeout."""
        try:
            raw = cast(bytes, resp.read(limit) if limit >= 0 else resp.read())
        except (OSError, http.client.HTTPException) as e:
            raise self._transport(e, method, path, request_id, deadline) from e
        if deadline.expired:
            raise MemhostTransportError(f"{method} {path}: timed out", request_id, True)
        return raw

    @staticmethod
    def _transport(e: BaseException, method: str, path: str, request_id: str, deadline: _Deadline) -> MemhostTransportError:
        reason = getattr(e, "reason", e)
        timed_out = deadline.expired or isinstance(reason, (TimeoutError, socket.timeout))
        what = "timed out" if timed_out else str(reason)
        return MemhostTransportError(f"{method} {path}: {what}", request_id, timed_out)

    def _decode(self, method: str, path: str, resp: Any, request_id: str, deadline: _Deadline) -> tuple[int, Any]:
        """Reads an answer; answers its status and decoded JSON (None when empty)."""
        try:
            with resp:
                raw = self._read(resp, method, path, request_id, deadline)
                status: int = resp.status or 0
        finally:
            deadline.stop()
        if not raw:
            return status, None
        try:
            return status, json.loads(raw)
        except ValueError as e:
            raise MemhostError(status, "unknown", f"{method} {path}: answer is not JSON: {e}", request_id) from None

    def _json(self, method: str, path: str, body: Any = None, query: dict[str, str | None] | None = None) -> Any:
        return self._decode(method, path, *self._open(method, path, body, query))[1]

    # --- records ---------------------------------------------------------

    @_operation("remember")
    def remember(self, records: Sequence[RecordInput], *, realm: str | None = None) -> RememberResult:
        """Stores records, all or nothing; answers their ids in request order.

        An agent token's shared-scope records are stored as proposals:
        the answer then has status "proposed"."""
        body = _drop_none({"realm": realm, "records": list(records)})
        return cast(RememberResult, self._json("POST", "/v1/records", body))

    @_operation("getRecord")
    def get(self, record_id: str, *, realm: str | None = None) -> Record:
        return cast(Record, self._json("GET", "/v1/records/" + _seg(record_id), query={"realm": realm}))

    @_operation("forgetRecord")
    def forget(self, record_id: str, *, realm: str | None = None) -> None:
        """Forgets a record (also when it is already gone)."""
        self._json("DELETE", "/v1/records/" + _seg(record_id), query={"realm": realm})

    @_operation("approveRecord")
    def approve(self, record_id: str, *, realm: str | None = None, target: str | None = None) -> Approval:
        """Approves an agent's proposal (application callers only).

        `target` is the record the listing showed it replacing ("" for none):
        if it would now replace another, nothing changes and TargetChanged is
        raised."""
        path = "/v1/records/" + _seg(record_id) + "/approve"
        return cast(Approval, self._json("POST", path, query={"realm": realm, "target": target}))

    @_operation("rejectRecord")
    def reject(self, record_id: str, *, realm: str | None = None) -> dict[str, Any]:
        """Rejects (forgets) an agent's pending proposal (application callers only)."""
        path = "/v1/records/" + _seg(record_id) + "/reject"
        return cast("dict[str, Any]", self._json("POST", path, query={"realm": realm}))

    @_operation("listProposals")
    def proposals(self, *, realm: str | None = None, after: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """A realm's pending proposals, oldest first, each with its proposer and diff."""
        query = {"realm": realm, "after": after, "limit": None if limit is None else str(limit)}
        return cast("dict[str, Any]", self._json("GET", "/v1/proposals", query=query))

    @_operation("listRecords")
    def records(
        self,
        *,
        realm: str | None = None,
        scope: str | None = None,
        q: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        trust: str | None = None,
        since: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Lists or searches a realm's records (application callers only)."""
        query = {
            "realm": realm, "scope": scope, "q": q, "kind": kind, "tag": tag, "status": status,
            "trust": trust, "since": since, "after": after, "limit": None if limit is None else str(limit),
        }
        return cast("dict[str, Any]", self._json("GET", "/v1/records", query=query))

    @_operation("scopeCounts")
    def scopes(self, *, realm: str | None = None) -> dict[str, Any]:
        """A realm's records per scope and status."""
        return cast("dict[str, Any]", self._json("GET", "/v1/scopes", query={"realm": realm}))

    @_operation("sessionTrace")
    def trace(
        self, session: str, *, realm: str | None = None, identity: str | None = None, after: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """A session's turn trace: what each turn injected and what it left out (after: the next of the page before)."""
        query = {"realm": realm, "identity": identity, "after": after, "limit": None if limit is None else str(limit)}
        return cast("dict[str, Any]", self._json("GET", "/v1/sessions/" + _seg(session) + "/trace", query=query))

    @_operation("listTraces")
    def traces(self, *, realm: str | None = None, after: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """A realm's traced sessions, most recent first (after: the next of the page before)."""
        query = {"realm": realm, "after": after, "limit": None if limit is None else str(limit)}
        return cast("dict[str, Any]", self._json("GET", "/v1/traces", query=query))

    @_operation("recordTrace")
    def record_trace(
        self, record_id: str, *, realm: str | None = None, after: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """The newest turns that injected a record (after: the next of the page before)."""
        query = {"realm": realm, "after": after, "limit": None if limit is None else str(limit)}
        return cast("dict[str, Any]", self._json("GET", "/v1/records/" + _seg(record_id) + "/trace", query=query))

    @_operation("recall")
    def recall(
        self,
        identity: IdentityLike,
        query: str | None = None,
        *,
        scopes: Sequence[str] | None = None,
        limit: int | None = None,
        tags: Sequence[str] | None = None,
        exclude_tags: Sequence[str] | None = None,
        now: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> RecallResult:
        """Records most relevant to query. now (RFC 3339) is what the query's
        time words ("last Saturday") are read against; since and until keep
        records that happened in [since, until)."""
        body = _drop_none(
            {
                "identity": _identity(identity),
                "query": query,
                "scopes": list(scopes) if scopes is not None else None,
                "limit": limit,
                "tags": list(tags) if tags is not None else None,
                "exclude_tags": list(exclude_tags) if exclude_tags is not None else None,
                "now": now,
                "since": since,
                "until": until,
            }
        )
        return cast(RecallResult, self._json("POST", "/v1/recall", body))

    @_operation("manifest")
    def manifest(self, identity: IdentityLike, *, tier: str | None = None, k: int | None = None) -> ManifestResult:
        body = _drop_none({"identity": _identity(identity), "tier": tier, "k": k})
        return cast(ManifestResult, self._json("POST", "/v1/manifest", body))

    # --- injection -------------------------------------------------------

    @_operation("injectTurn")
    def inject_turn(
        self,
        identity: IdentityLike,
        content: Content,
        *,
        session: str | None = None,
        now: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> TurnInjection:
        """Memory to put beside this turn's user message; now, since and until
        as for recall."""
        body = _drop_none(
            {"identity": _identity(identity), "session": session, "content": content, "now": now, "since": since, "until": until}
        )
        return cast(TurnInjection, self._json("POST", "/v1/turns/inject", body))

    @_operation("injectBuild")
    def inject_build(
        self,
        identity: IdentityLike,
        *,
        query_text: str | None = None,
        query_terms: Sequence[str] | None = None,
    ) -> BuildInjection:
        """The system-prompt memory block for a new agent build."""
        body = _drop_none(
            {
                "identity": _identity(identity),
                "query_text": query_text,
                "query_terms": list(query_terms) if query_terms is not None else None,
            }
        )
        return cast(BuildInjection, self._json("POST", "/v1/builds/inject", body))

    @_operation("defang")
    def defang(self, identity: IdentityLike, content: Content) -> Defanged:
        """Neutralises forged memory envelopes in inbound content."""
        body = {"identity": _identity(identity), "content": content}
        return cast(Defanged, self._json("POST", "/v1/defang", body))

    # --- compaction ------------------------------------------------------

    @_operation("compactConversation")
    def compact(
        self,
        conversation_id: str,
        identity: IdentityLike,
        evicted: Sequence[Message],
        *,
        session: str | None = None,
    ) -> Compaction:
        """Folds the evicted messages (all of them so far, in order) into the rolling summary."""
        body = _drop_none({"identity": _identity(identity), "session": session, "evicted": list(evicted)})
        path = "/v1/conversations/" + _seg(conversation_id) + "/compact"
        return cast(Compaction, self._json("POST", path, body))

    @_operation("forgetConversation")
    def forget_conversation(self, conversation_id: str, *, realm: str | None = None, identity: str | None = None) -> None:
        """Forgets a conversation's summary; an agent names the identity it acts as (it forgets only that identity's)."""
        query = {"realm": realm, "identity": identity}
        self._json("DELETE", "/v1/conversations/" + _seg(conversation_id), query=query)

    @_operation("sessionCompacted")
    def session_compacted(self, session: str, identity: IdentityLike) -> None:
        """Says the session was compacted: its dedup set and byte counter reset."""
        path = "/v1/sessions/" + _seg(session) + "/compacted"
        self._json("POST", path, {"identity": _identity(identity)})

    # --- memory guide ----------------------------------------------------

    @_operation("guideSessionStart")
    def guide_session_start(
        self, identity: IdentityLike, session: str, task: str, filters: GuideFilters | None = None
    ) -> GuideBlock:
        body = {"identity": _identity(identity), "session": session, "task": task, **(filters or {})}
        return cast(GuideBlock, self._json("POST", "/v1/guide/session-start", body))

    @_operation("guideBeforeIteration")
    def guide_before_iteration(
        self,
        identity: IdentityLike,
        session: str,
        last_user_message: str | None = None,
        filters: GuideFilters | None = None,
    ) -> GuideIteration:
        body = _drop_none(
            {"identity": _identity(identity), "session": session, "last_user_message": last_user_message}
        )
        body.update(filters or {})
        return cast(GuideIteration, self._json("POST", "/v1/guide/before-iteration", body))

    # --- archive ---------------------------------------------------------

    @_operation("exportRecords")
    def export(self, *, realm: str | None = None, after: str | None = None, limit: int | None = None) -> ExportPage:
        """One page of a realm's full records; follow `next` until it is empty."""
        body = _drop_none({"realm": realm, "after": after, "limit": limit})
        return cast(ExportPage, self._json("POST", "/v1/export", body))

    def export_all(self, *, realm: str | None = None, page_size: int | None = None) -> Iterator[Record]:
        """Every record of a realm, page by page."""
        after = ""
        while True:
            page = self.export(realm=realm, after=after or None, limit=page_size)
            yield from page["records"]
            after = page["next"]
            if not after:
                return

    @_operation("importRecords")
    def import_records(self, records: Sequence[Record], *, realm: str | None = None) -> ImportResult:
        """Stores exported records as they are (ids and times kept), all or nothing,
        but for those whose id the store gives another record, answered in "conflicts"."""
        body = _drop_none({"realm": realm, "records": list(records)})
        return cast(ImportResult, self._json("POST", "/v1/import", body))

    @_operation("reindex")
    def reindex(
        self,
        *,
        realm: str | None = None,
        on_progress: Callable[[ReindexProgress], None] | None = None,
    ) -> ReindexResult:
        """Rebuilds the realm provider's search index; `timeout` bounds each wait between progress lines.

        A failure after the server started streaming arrives as its last
        line and is raised like any error answer."""
        resp, request_id, deadline = self._open("POST", "/v1/admin/reindex", _drop_none({"realm": realm}))
        with resp:
            try:
                return self._reindex_lines(resp, request_id, deadline, on_progress)
            finally:
                deadline.stop()

    def _reindex_lines(
        self, resp: Any, request_id: str, deadline: _Deadline, on_progress: Callable[[ReindexProgress], None] | None
    ) -> ReindexResult:
        while True:
            try:
                line = resp.readline(_MAX_LINE_BYTES + 1)
            except (OSError, http.client.HTTPException) as e:
                raise self._transport(e, "POST", "/v1/admin/reindex", request_id, deadline) from e
            if deadline.expired:
                raise MemhostTransportError("POST /v1/admin/reindex: timed out", request_id, True)
            deadline.restart()
            if not line:
                raise MemhostTransportError(
                    "POST /v1/admin/reindex: the answer ended without a result", request_id
                )
            if len(line) > _MAX_LINE_BYTES and not line.endswith(b"\n"):
                raise MemhostError(
                    resp.status or 0, "unknown", "POST /v1/admin/reindex: bad answer line: longer than 1 MiB", request_id
                )
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as e:
                raise MemhostError(resp.status or 0, "unknown", f"POST /v1/admin/reindex: bad answer line: {e}", request_id) from None
            if not isinstance(item, dict):
                raise MemhostError(resp.status or 0, "unknown", "POST /v1/admin/reindex: an answer line is not an object", request_id)
            if "progress" in item:
                if on_progress is not None:
                    on_progress(cast(ReindexProgress, item["progress"]))
            elif "result" in item:
                return cast(ReindexResult, item["result"])
            elif "error" in item:
                raise error_from_body(resp.status or 0, item["error"], request_id)

    # --- operations ------------------------------------------------------

    @_operation("plugins")
    def plugins(self) -> PluginsResult:
        return cast(PluginsResult, self._json("GET", "/v1/plugins"))

    @_operation("GET /healthz")
    def healthz(self) -> bool:
        """Liveness: True when the server answers."""
        self._json("GET", "/healthz")
        return True

    @_operation("GET /readyz")
    def readyz(self) -> Readiness:
        """Readiness: a server whose plugins are not all up answers ready=False (not an exception)."""
        status, body = self._decode("GET", "/readyz", *self._open("GET", "/readyz", accept=(503,)))
        answer = cast(dict[str, Any], body or {})
        ready: Readiness = {"ready": status == 200, "status": str(answer.get("status", ""))}
        if "plugins" in answer:
            ready["plugins"] = answer["plugins"]
        return ready

    @_operation("GET /metrics")
    def metrics(self) -> str:
        """The Prometheus text exposition."""
        resp, request_id, deadline = self._open("GET", "/metrics")
        try:
            with resp:
                return self._read(resp, "GET", "/metrics", request_id, deadline).decode("utf-8")
        finally:
            deadline.stop()
