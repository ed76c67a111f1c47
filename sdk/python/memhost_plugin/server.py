"""sdk.Serve for Python: the go-plugin handshake, mutual TLS, the
services every plugin serves, and the memhost services of the plugin's
kinds, with the Go SDK's input validation and error mapping
(docs/protocol.md describes each part)."""

import base64
import dataclasses
import datetime
import inspect
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from concurrent import futures

import grpc

from . import errors, records
from . import plugin_pb2 as pb
from .calls import call_deadline, call_ended
from .log import logger, request_id

PROTOCOL_VERSION = 1
COOKIE_KEY, COOKIE_VALUE = "MEMHOST_PLUGIN_COOKIE", "5f0c0a3e9d2b4c71a8e6f3b2d9c4e1a7"
MAX_MESSAGE_BYTES = 1000 * (64 * 1024 + 200 + 400 + 32 * 64 + 1024)
CHUNK_ROWS = 500
SOCKET_DIR_PREFIX = "mhsock-"

# Each provider capability and the method that implements it.
CAPABILITIES = {"write": "remember", "fetch": "get", "forget": "forget", "manifest": "manifest",
                "supersede": "supersede", "usage": "mark_used", "usage_counts": "count_uses", "ledger": "write_ledger",
                "archive": ("export", "import_records"), "reindex": "reindex"}
KIND_METHODS = {"provider": "recall", "operator_resolver": "resolve_operator", "mob_resolver": "resolve_mobs",
                "compactor": "compact"}


@dataclasses.dataclass
class Info:
    name: str
    version: str
    kinds: list = dataclasses.field(default_factory=lambda: ["provider"])
    capabilities: list = dataclasses.field(default_factory=list)
    config_schema: dict = None


@dataclasses.dataclass
class HostInfo:
    version: str = ""
    protocols: list = dataclasses.field(default_factory=list)
    capabilities: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class RecallQuery:
    realm: str
    query: str
    scopes: list
    limit: int
    exclude_ids: list
    tags: list
    exclude_tags: list
    # A hit's when_ms() must lie in [since_ms, until_ms); 0 leaves an end open.
    since_ms: int = 0
    until_ms: int = 0


@dataclasses.dataclass
class ManifestQuery:
    realm: str
    scopes: list
    tier: str  # "working_set" or "full"
    k: int


@dataclasses.dataclass
class ManifestRow:
    id: str
    scope: str
    kind: str
    title: str
    description: str
    updated_ms: int
    rank: float = 0.0


@dataclasses.dataclass
class LedgerEntry:
    realm: str
    identity: str
    session: str
    record_id: str
    surface: str
    bytes: int
    at_ms: int


def check_plugin(p):
    """Raises ValueError unless p's info is well formed and p implements
    every kind and capability it declares (serve refuses to start
    otherwise; call it from a unit test to learn sooner)."""
    info = p.info()
    problem = records.token_problem(info.name, 64)
    if problem:
        raise ValueError("info().name " + problem)
    if not _is_semver(info.version):
        raise ValueError("info().version %r is not a semantic version like 1.2.3" % info.version)
    for field in ("kinds", "capabilities"):
        value = getattr(info, field)
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ValueError("info().%s must be a list of names, like [\"%s\"], not %r" % (field, "provider" if field == "kinds" else "fetch", value))
    if not info.kinds:
        raise ValueError("info().kinds is empty")
    for k in info.kinds:
        if k not in KIND_METHODS:
            raise ValueError("info().kinds names %r, which this SDK does not serve (it serves %s)" % (k, ", ".join(KIND_METHODS)))
        if not callable(getattr(p, KIND_METHODS[k], None)):
            raise ValueError("info().kinds declares %r but the plugin has no %s method" % (k, KIND_METHODS[k]))
    used = ["configure", "close"] + [KIND_METHODS[k] for k in info.kinds]
    for c in info.capabilities:
        if c not in CAPABILITIES:
            raise ValueError("info().capabilities names unknown capability %r" % c)
        methods = CAPABILITIES[c] if isinstance(CAPABILITIES[c], tuple) else (CAPABILITIES[c],)
        for m in methods:
            if not callable(getattr(p, m, None)):
                raise ValueError("info().capabilities declares %r but the plugin has no %s method" % (c, m))
        used += methods
    if info.config_schema is not None:
        try:
            _schema_json(info.config_schema)
        except (TypeError, ValueError) as e:
            raise ValueError("info().config_schema cannot be written as JSON: %s" % e) from None
    # The SDK runs each method on a thread of its own and never awaits what
    # it returns: an async method would answer a coroutine, or do nothing.
    for m in used:
        fn = getattr(p, m, None)
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise ValueError("%s is async: the SDK calls plugin methods on threads and does not await them, so define it with def" % m)


def _schema_json(schema):
    """schema as JSON bytes. NaN and Infinity are no JSON: json.dumps
    would write them as bare words the host cannot read."""
    return json.dumps(schema, allow_nan=False).encode()


def _is_semver(v):
    core = v.split("-", 1)[0].split("+", 1)[0]
    parts = core.split(".")
    return len(parts) == 3 and all(x.isascii() and x.isdigit() for x in parts)


# Conversions between the wire and the SDK's records.


def record_from_pb(m):
    r = records.Record(
        id=m.id, realm=m.realm, scope=m.scope, kind=m.kind, title=m.title, description=m.description, body=m.body,
        tags=list(m.tags), trust=m.trust, expires_ms=m.expires_unix_ms,
        thread=(m.thread.id, m.thread.seq) if m.HasField("thread") else None, occurred_ms=m.occurred_unix_ms)
    if isinstance(m, pb.Record):
        r.status, r.supersedes, r.content_hash = m.status, m.supersedes, m.content_hash
        r.created_ms, r.updated_ms, r.use_count, r.last_used_ms = m.created_unix_ms, m.updated_unix_ms, m.use_count, m.last_used_unix_ms
    return r


def record_to_pb(r):
    m = pb.Record(id=r.id, realm=r.realm, scope=r.scope, kind=r.kind, title=r.title, description=r.description,
                  body=r.body, tags=r.tags, trust=r.trust, status=r.status, supersedes=r.supersedes,
                  created_unix_ms=r.created_ms, updated_unix_ms=r.updated_ms, expires_unix_ms=r.expires_ms,
                  content_hash=r.content_hash, use_count=r.use_count, last_used_unix_ms=r.last_used_ms,
                  occurred_unix_ms=r.occurred_ms)
    if r.thread:
        m.thread.id, m.thread.seq = r.thread
    return m


def _rows_to_pb(rows):
    return [pb.ManifestRow(id=r.id, scope=r.scope, kind=r.kind, title=r.title, description=r.description,
                           updated_unix_ms=r.updated_ms, rank=r.rank) for r in rows]


class _Unsupported(errors.Unsupported):
    def __init__(self, cap):
        super().__init__("capability %r is not declared by this plugin" % cap)


class _Services:
    """The memhost services over one plugin value; every request is
    validated here first, so the plugin sees valid input only."""

    def __init__(self, impl):
        self.impl, self.info = impl, impl.info()

    def need(self, cap):
        if cap not in self.info.capabilities:
            raise _Unsupported(cap)

    def Info(self, req, ctx):
        i = self.info
        schema = _schema_json(i.config_schema) if i.config_schema is not None else b""
        return pb.InfoResponse(name=i.name, version=i.version, kinds=i.kinds, protocol_versions=[PROTOCOL_VERSION],
                               capabilities=i.capabilities, config_schema=schema)

    def Configure(self, req, ctx):
        raw = req.config_json or b"{}"
        try:
            config = json.loads(raw)
        except ValueError as e:
            raise errors.invalid("config", "is not valid JSON: %s" % e)
        if not isinstance(config, dict):
            raise errors.invalid("config", "must be a JSON object")
        host = HostInfo(req.host.version, list(req.host.protocol_versions), list(req.host.capabilities))
        self.impl.configure(config, host)
        return pb.ConfigureResponse()

    def Recall(self, req, ctx):
        records.validate_realm(req.realm)
        records.check_scopes(req.scopes)
        if req.limit < 0:
            raise errors.invalid("limit", "%d is negative" % req.limit)
        limit = min(req.limit or records.DEFAULT_RECALL_LIMIT, records.MAX_BATCH)
        records.check_ids("exclude_ids", req.exclude_ids)
        records.check_tag_filter("tags", req.tags)
        records.check_tag_filter("exclude_tags", req.exclude_tags)
        records.check_window(req.since_unix_ms, req.until_unix_ms)
        q = RecallQuery(req.realm, req.query, list(req.scopes), limit, list(req.exclude_ids), list(req.tags), list(req.exclude_tags),
                        req.since_unix_ms, req.until_unix_ms)
        hits = self.impl.recall(q)
        return pb.RecallResponse(hits=[pb.Hit(record=record_to_pb(r), score=s) for r, s in hits])

    def Remember(self, req, ctx):
        self.need("write")
        recs = [record_from_pb(m) for m in req.records]
        records.check_records(req.realm, recs, records.validate_record)
        return pb.RememberResponse(ids=self.impl.remember(req.realm, recs))

    def Get(self, req, ctx):
        self.need("fetch")
        records.validate_realm(req.realm)
        records.check_ids("ids", req.ids)
        return pb.GetResponse(records=[record_to_pb(r) for r in self.impl.get(req.realm, list(req.ids))])

    def Forget(self, req, ctx):
        self.need("forget")
        records.validate_realm(req.realm)
        records.check_ids("ids", req.ids)
        return pb.ForgetResponse(forgotten=self.impl.forget(req.realm, list(req.ids)))

    def Manifest(self, req, ctx, send):
        self.need("manifest")
        records.validate_realm(req.realm)
        records.check_scopes(req.scopes)
        tier = {pb.MANIFEST_TIER_WORKING_SET: "working_set", pb.MANIFEST_TIER_FULL: "full"}.get(req.tier)
        if tier is None:
            raise errors.invalid("tier", "must be the working set or full")
        if req.k < 0:
            raise errors.invalid("k", "%d is negative" % req.k)
        rows = self.impl.manifest(ManifestQuery(req.realm, list(req.scopes), tier, req.k))
        # An empty manifest is still one message, so the host can tell "no
        # rows" from a stream cut short.
        out = [pb.ManifestResponse(rows=_rows_to_pb(rows[i:i + CHUNK_ROWS])) for i in range(0, len(rows), CHUNK_ROWS)]
        return out or [pb.ManifestResponse()]

    def Supersede(self, req, ctx):
        self.need("supersede")
        rep = record_from_pb(req.replacement)
        check = dataclasses.replace(rep, scope=rep.scope or "realm", kind=rep.kind or "fact")
        records.validate_realm(req.realm)
        records.validate_id(req.old_id, "old_id")
        try:
            records.validate_record(check)
        except errors.FieldError as e:
            raise e.prefixed("replacement")
        return pb.SupersedeResponse(new_id=self.impl.supersede(req.realm, req.old_id, rep))

    def MarkUsed(self, req, ctx):
        self.need("usage")
        records.validate_realm(req.realm)
        records.check_ids("ids", req.ids)
        self.impl.mark_used(req.realm, list(req.ids), req.at_unix_ms or records.now_ms())
        return pb.MarkUsedResponse()

    def CountUses(self, req, ctx):
        self.need("usage_counts")
        records.validate_realm(req.realm)
        uses = [(u.id, u.count) for u in req.uses]
        records.check_uses("uses", uses)
        self.impl.count_uses(req.realm, uses, req.at_unix_ms or records.now_ms())
        return pb.CountUsesResponse()

    def WriteLedger(self, req, ctx):
        self.need("ledger")
        records.check_batch("entries", req.entries)
        for i, e in enumerate(req.entries):
            try:
                records.validate_ledger_entry(e.realm, e.identity, e.session, e.record_id, e.surface, e.bytes)
            except errors.FieldError as err:
                raise err.prefixed("entries[%d]" % i)
        self.impl.write_ledger([LedgerEntry(e.realm, e.identity, e.session, e.record_id, e.surface, e.bytes, e.at_unix_ms) for e in req.entries])
        return pb.WriteLedgerResponse()

    def Export(self, req, ctx):
        self.need("archive")
        records.validate_realm(req.realm)
        if req.after:
            records.validate_id(req.after, "after")
        if req.limit < 0:
            raise errors.invalid("limit", "%d is negative" % req.limit)
        limit = req.limit if 0 < req.limit <= records.MAX_EXPORT_PAGE else records.MAX_EXPORT_PAGE
        recs, nxt = self.impl.export(req.realm, req.after, limit)
        return pb.ExportResponse(records=[record_to_pb(r) for r in recs], next=nxt)

    def Import(self, req, ctx):
        self.need("archive")
        recs = [record_from_pb(m) for m in req.records]
        records.check_records(req.realm, recs, lambda r: records.prepare_import(r, req.realm))
        imported, skipped = self.impl.import_records(req.realm, recs)
        return pb.ImportResponse(imported=imported, skipped=skipped)

    def Reindex(self, req, ctx, send):
        self.need("reindex")
        if req.realm:
            records.validate_realm(req.realm)
        # Each report goes to the host as the rebuild runs (send keeps the
        # latest one only, so a report per record costs the rebuild
        # nothing), as sdk.Serve streams it.
        n = self.impl.reindex(req.realm, lambda done, total: send(pb.ReindexResponse(progress=pb.ReindexProgress(done=done, total=total))))
        return [pb.ReindexResponse(done=pb.ReindexDone(reindexed=n))]

    def _identity(self, req):
        records.validate_realm(req.realm)
        records.validate_id(req.identity, "identity.id")

    def ResolveOperator(self, req, ctx):
        self._identity(req)
        return pb.ResolveOperatorResponse(operator=self.impl.resolve_operator(req.realm, req.identity))

    def ResolveMobs(self, req, ctx):
        self._identity(req)
        return pb.ResolveMobsResponse(mobs=self.impl.resolve_mobs(req.realm, req.identity))

    def Compact(self, req, ctx):
        if not req.evicted:
            raise errors.invalid("evicted", "lists no messages")
        if req.max_bytes < 0:
            raise errors.invalid("max_bytes", "%d is negative" % req.max_bytes)
        for i, m in enumerate(req.evicted):
            if records.blank(m.role):
                raise errors.invalid("evicted[%d].role" % i, "must not be empty")
        carry = (req.carry_over.role, req.carry_over.content) if req.HasField("carry_over") else None
        role, content = self.impl.compact(req.conversation_id, [(m.role, m.content) for m in req.evicted],
                                          carry, req.idempotency_key, req.max_bytes)
        return pb.CompactResponse(artifact=pb.Message(role=role, content=content))


SERVICES = {
    "Plugin": ("Info", "Configure"),
    "Provider": ("Recall", "Remember", "Get", "Forget", "Manifest", "Supersede", "MarkUsed", "CountUses", "WriteLedger", "Export", "Import", "Reindex"),
    "OperatorResolver": ("ResolveOperator",),
    "MobResolver": ("ResolveMobs",),
    "Compactor": ("Compact",),
}
STREAMING = ("Manifest", "Reindex")
SERVICE_KIND = {"Provider": "provider", "OperatorResolver": "operator_resolver", "MobResolver": "mob_resolver", "Compactor": "compactor"}


_SURROGATES = re.compile("[\ud800-\udfff]")


def _abort(ctx, rid, e, tb=""):
    """Answers e as the gRPC status the host maps back to its code; rid is
    the call's request id and tb the traceback of an unexpected failure,
    for the plugin's log."""
    e = errors.classify(e)
    if isinstance(e, errors.MemhostError):
        code, msg, details = e.grpc_code, str(e), e.details()
    else:
        token = request_id.set(rid)
        try:
            logger.error("call failed", error=repr(e), traceback=tb)
        finally:
            request_id.reset(token)
        # The answer reaches the API's client: the exception's text, never
        # its Python type name (the log above has both, and the traceback).
        text = str(e).strip()
        code, details = grpc.StatusCode.UNKNOWN, []
        msg = "the plugin failed: " + text if text else "the plugin failed; its log has the details"
    # A lone surrogate (a file name os.fsdecode read from bytes that are
    # not UTF-8) cannot be encoded: grpcio would answer its own encoding
    # failure in place of the message. It goes as U+FFFD, as UTF-8
    # decoding answers a byte it cannot read.
    msg = _SURROGATES.sub("\ufffd", msg)
    if details:
        ctx.set_trailing_metadata((("grpc-status-details-bin", errors.status_details(code, msg, details)),))
    ctx.abort(code, msg)


# NO_DEADLINE is past any deadline a call carries: grpcio answers
# time_remaining() of a call without one as about 9.2e18 seconds, which
# threading's waits cannot take.
NO_DEADLINE = 1e9


def _remaining(ctx):
    """The seconds left of the call, or None when it has no deadline."""
    left = ctx.time_remaining()
    return None if left is None or left > NO_DEADLINE else left


def _handler(services, name, streaming):
    fn = getattr(services, name)

    def call(req, ctx):
        """Runs the method, yielding what it sends before its result (a
        stream's progress), and returns its result."""
        rid = dict(ctx.invocation_metadata() or ()).get("memhost-request-id", "")
        if not ctx.is_active():
            _abort(ctx, rid, errors.DeadlineExceeded("the call's deadline passed before it started"))
        # The plugin's code runs on a thread of its own, and this server
        # thread waits for it no longer than the call lives: a handler
        # stuck past its deadline holds its own thread, not one of the
        # server's few, which health checks, Shutdown and every other
        # call need.
        lock, wake, finished, ended, out = threading.Lock(), threading.Event(), threading.Event(), threading.Event(), {}

        left = _remaining(ctx)
        deadline = None if left is None else time.monotonic() + left

        def send(msg):
            # Only the latest message waits: a plugin reporting progress
            # per record is never held up by a slow host.
            with lock:
                if not finished.is_set():
                    out["pending"] = msg
            wake.set()

        def run():
            inner, until, gone = request_id.set(rid), call_deadline.set(deadline), call_ended.set(ended)
            try:
                out["result"] = fn(req, ctx, send) if streaming else fn(req, ctx)
            except BaseException as e:  # SystemExit too: every call gets an answer
                out["error"] = (e, traceback.format_exc())
            finally:
                call_ended.reset(gone)
                call_deadline.reset(until)
                request_id.reset(inner)
                finished.set()
                wake.set()

        def end():
            # The call ended (deadline, cancellation): stop waiting, and
            # tell the plugin's code (check_deadline) it is answered.
            ended.set()
            wake.set()

        threading.Thread(target=run, name="memhost-" + name, daemon=True).start()
        if not ctx.add_callback(end):
            end()  # it ended already
        while True:
            wake.wait(_remaining(ctx))
            wake.clear()
            # finished is read before the pending message, so a message
            # sent before the method returned is never left behind. (Not
            # into ended: run and end read that name for the call's event.)
            returned = finished.is_set()
            with lock:
                pending = out.pop("pending", None)
            if pending is not None and ctx.is_active():
                yield pending
            if returned or not ctx.is_active():
                break
            remaining = _remaining(ctx)
            if remaining is not None and remaining <= 0:
                break
        if "result" in out:
            return out["result"]
        if "error" in out:
            _abort(ctx, rid, *out["error"])
        remaining = _remaining(ctx)
        if remaining is not None and remaining <= 0:
            _abort(ctx, rid, errors.DeadlineExceeded("the call's deadline passed before the plugin answered"))
        ctx.abort(grpc.StatusCode.CANCELLED, "the call was cancelled before the plugin answered")

    if streaming:
        def stream(req, ctx):
            yield from (yield from call(req, ctx))
        return stream

    def unary(req, ctx):
        answer = call(req, ctx)
        while True:
            try:
                next(answer)  # a unary method sends nothing before its result
            except StopIteration as stop:
                return stop.value
    return unary


def _generic_handlers(services, kinds):
    out = []
    for svc, methods in SERVICES.items():
        if svc in SERVICE_KIND and SERVICE_KIND[svc] not in kinds:
            continue
        desc = pb.DESCRIPTOR.services_by_name[svc]
        handlers = {}
        for m in methods:
            md = desc.methods_by_name[m]
            req_cls, resp_cls = getattr(pb, md.input_type.name), getattr(pb, md.output_type.name)
            streaming = m in STREAMING
            h = grpc.unary_stream_rpc_method_handler if streaming else grpc.unary_unary_rpc_method_handler
            handlers[m] = h(_handler(services, m, streaming),
                            request_deserializer=req_cls.FromString, response_serializer=resp_cls.SerializeToString)
        out.append(grpc.method_handlers_generic_handler(desc.full_name, handlers))
    return out


def _go_plugin_handlers(stopping):
    """grpc.health.v1.Health, plugin.GRPCController and plugin.GRPCStdio,
    on raw bytes: none of their fields needs reading."""
    raw = {"request_deserializer": None, "response_serializer": None}
    serving = b"\x08\x01"  # HealthCheckResponse{status: SERVING}

    def stdio(req, ctx):
        # This process logs to stderr itself: keep the stream open, quiet.
        stopping.wait()
        return iter(())

    return [
        grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
            "Check": grpc.unary_unary_rpc_method_handler(lambda req, ctx: serving, **raw)}),
        grpc.method_handlers_generic_handler("plugin.GRPCController", {
            "Shutdown": grpc.unary_unary_rpc_method_handler(lambda req, ctx: (stopping.set(), b"")[1], **raw)}),
        grpc.method_handlers_generic_handler("plugin.GRPCStdio", {
            "StreamStdio": grpc.unary_stream_rpc_method_handler(stdio, **raw)}),
    ]


def _server_certificate(client_pem):
    """A fresh self-signed P-256 certificate for localhost, its own CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "memhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=30 * 365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=client_pem.encode(), require_client_auth=True)
    der = cert.public_bytes(serialization.Encoding.DER)
    return creds, base64.b64encode(der).decode().rstrip("=")


# MAX_CONCURRENT_CALLS bounds the calls the server serves at once; the
# host's own concurrency stays far below it.
MAX_CONCURRENT_CALLS = 1024

# CLOSE_TIMEOUT bounds closing the plugin at exit: a store call stuck
# without end holds the lock close needs, and the process must still go.
CLOSE_TIMEOUT = 2.0


def _close(p):
    close = getattr(p, "close", None)
    if not callable(close):
        return
    done = threading.Event()

    def run():
        try:
            close()
        except Exception as e:
            logger.error("close failed", error=repr(e))
        finally:
            done.set()

    threading.Thread(target=run, name="memhost-close", daemon=True).start()
    if not done.wait(CLOSE_TIMEOUT):
        logger.error("close did not finish; exiting without it", timeout_seconds=CLOSE_TIMEOUT)


def _remove_socket_dir():
    d = os.environ.get("PLUGIN_UNIX_SOCKET_DIR", "")
    if d and os.path.basename(d.rstrip("/")).startswith(SOCKET_DIR_PREFIX):
        import shutil
        shutil.rmtree(d, ignore_errors=True)


def _watch_parent(p, parent):
    """Exits once the host is gone, closing the store and removing the
    socket directory no one else will: the plugin was re-parented, or the
    host it was started by (MEMHOST_HOST_PID) no longer runs, which is how
    a plugin whose host died before it first read its parent learns it."""
    try:
        host = int(os.environ.get("MEMHOST_HOST_PID", ""))
    except ValueError:
        host = 0
    while True:
        if os.getppid() != parent or (host > 0 and not _running(host)):
            logger.warn("host process is gone; exiting", parent_pid=parent)
            _close(p)
            _remove_socket_dir()
            os._exit(0)
        threading.Event().wait(0.25)


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it runs
    return True


def serve(p):
    """Runs p as a plugin process. Call it from the script's main; it
    returns never: the process exits once the host shut the plugin down
    (closing p first when it has a close method), or once the host died."""
    try:
        check_plugin(p)
    except ValueError as e:
        sys.stderr.write("memhost plugin %s: %s\n" % (type(p).__name__, e))
        sys.exit(1)
    # --debug: started by hand (under a debugger) for a host to attach to
    # through MEMHOST_REATTACH_PLUGINS; no TLS, and no parent to watch.
    debug = "--debug" in sys.argv[1:]
    if not debug and os.environ.get(COOKIE_KEY) != COOKIE_VALUE:
        sys.stderr.write("This is a memhost plugin: memhost starts it (see docs/plugins.md); it is not run by hand.\n")
        sys.exit(1)
    versions = os.environ.get("PLUGIN_PROTOCOL_VERSIONS", str(PROTOCOL_VERSION)).split(",")
    if not debug and str(PROTOCOL_VERSION) not in versions:
        sys.stderr.write("memhost plugin: the host speaks protocols %s, this SDK speaks %d\n" % (",".join(versions), PROTOCOL_VERSION))
        sys.exit(1)
    # A write to a host that is gone must fail, not kill the process
    # before it closed its store.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    if debug:
        signal.signal(signal.SIGINT, lambda *_: stopping.set())
    else:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host's terminal's ^C is the host's to handle
        threading.Thread(target=_watch_parent, args=(p, os.getppid()), daemon=True).start()

    opts = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
    # A server thread waits out each call its plugin code runs (on a thread
    # of its own), up to the call's deadline: the pool must not run out
    # while calls queue on the plugin's own lock, or the host's health
    # check and Shutdown would wait behind them and the host would kill a
    # plugin that is merely busy. Waiting threads cost little.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=MAX_CONCURRENT_CALLS), options=opts)
    server.add_generic_rpc_handlers(_go_plugin_handlers(stopping) + _generic_handlers(_Services(p), p.info().kinds))
    sock_dir = tempfile.mkdtemp(prefix="mhdebug-") if debug else os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or tempfile.gettempdir()
    sock = tempfile.mktemp(prefix="plugin", dir=sock_dir)  # grpc creates it; a fresh name is all it needs
    cert = ""
    client_pem = "" if debug else os.environ.get("PLUGIN_CLIENT_CERT", "")
    if client_pem:
        creds, cert = _server_certificate(client_pem)
        server.add_secure_port("unix:" + sock, creds)
    else:
        server.add_insecure_port("unix:" + sock)
    server.start()
    if debug:
        target = {"protocol": "grpc", "protocol_version": PROTOCOL_VERSION, "pid": os.getpid(), "network": "unix", "address": sock}
        handshake = "MEMHOST_REATTACH_PLUGINS='%s'\n" % json.dumps({p.info().name: target}, separators=(",", ":"))
    else:
        handshake = "1|%d|unix|%s|grpc|%s\n" % (PROTOCOL_VERSION, sock, cert)
    # The host reads the first line on stdout as the handshake. What the
    # plugin printed is not protocol: the print() output still in stdout's
    # buffer (a pipe's is flushed only when full) and all it prints from
    # now on go to stderr, which the host logs; the handshake goes to the
    # real stdout, kept open for the host. (What was flushed before, by
    # print(flush=True) or PYTHONUNBUFFERED, is beyond repair.)
    host_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        sys.stdout.flush()
        sys.stdout.reconfigure(line_buffering=True)  # a line in the log as it is printed, as stderr's are
    except (AttributeError, OSError, ValueError):
        pass
    os.write(host_stdout, handshake.encode())
    stopping.wait()
    server.stop(grace=1).wait()
    _close(p)
    try:
        os.unlink(sock)
        if debug:
            os.rmdir(sock_dir)
    except OSError:
        pass
    sys.stderr.flush()
    os._exit(0)
