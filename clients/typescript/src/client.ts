import { MemhostError, MemhostTransportError, retryAfterSeconds } from "./errors.js";
import type { components, operations } from "./schema.js";

type Schemas = components["schemas"];

/** The JSON request body of an operation. */
export type RequestBody<Op extends keyof operations> = operations[Op] extends {
  requestBody: { content: { "application/json": infer B } };
}
  ? B
  : never;

/** The JSON answer of an operation for a status. */
export type Answer<Op extends keyof operations, S extends number = 200> = operations[Op]["responses"] extends {
  [K in S]: { content: { "application/json": infer A } };
}
  ? A
  : never;

export type Identity = Schemas["Identity"];
/** An identity, or its id alone (the default realm). */
export type IdentityLike = Identity | string;
export type RecordInput = Schemas["RecordInput"];
/** A stored record (named so as not to hide TypeScript's Record). */
export type MemoryRecord = Schemas["Record"];
export type Content = Schemas["Content"];
export type Message = Schemas["Message"];
export type ManifestRow = Schemas["ManifestRow"];
export type GuideFilters = Schemas["GuideFilters"];
export type ReindexLine = Schemas["ReindexLine"];
export type ReindexProgress = NonNullable<ReindexLine["progress"]>;
export type ReindexResult = NonNullable<ReindexLine["result"]>;

/** An operation's request body with the identity also given as an id alone. */
type WithIdentity<B> = B extends { identity: Identity } ? Omit<B, "identity"> & { identity: IdentityLike } : B;

export type RememberAnswer = Answer<"remember", 200> | Answer<"remember", 202>;
export type PluginStatus = NonNullable<Answer<"plugins">["plugins"]>[number];

export interface Readiness {
  ready: boolean;
  /** "ready" or "not ready". */
  status: string;
  /** Plugin detail of a server that is not ready (for a valid token, or a server without tokens). */
  plugins?: PluginStatus[];
}

export interface ClientOptions {
  /** Default http://127.0.0.1:7077. */
  baseUrl?: string;
  /** The bearer token; none for a server without tokens. */
  token?: string;
  /** Milliseconds a call may take, answer included (default 35000). */
  timeoutMs?: number;
  /** Makes the X-Request-Id sent with each request (default a random UUID). */
  newRequestId?: () => string;
}

export interface CallOptions {
  /** This call's timeout in milliseconds, instead of the client's. */
  timeoutMs?: number;
  /** Aborts the call. */
  signal?: AbortSignal;
  /** The X-Request-Id to send (letters, digits, -, _, ., at most 64 bytes). */
  requestId?: string;
}

/** A page of a listing: its realm, cursor and size. */
export interface PageParams {
  realm?: string;
  after?: string;
  limit?: number;
}

/** The filters of a record listing (GET /v1/records). */
export interface RecordFilter extends PageParams {
  scope?: string;
  q?: string;
  kind?: string;
  tag?: string;
  status?: string;
  trust?: string;
  since?: string;
}

/** A trace listing: its realm, size and cursor (the `next` of the page before; pages run to older traces). */
export interface TraceParams {
  realm?: string;
  after?: string;
  limit?: number;
}

function pageQuery(p: PageParams): { [name: string]: string | undefined } {
  return { realm: p.realm, after: p.after, limit: p.limit?.toString() };
}

function traceQuery(p: TraceParams): { [name: string]: string | undefined } {
  return { realm: p.realm, after: p.after, limit: p.limit?.toString() };
}

export interface RealmOptions extends CallOptions {
  realm?: string;
}

export interface ApproveOptions extends RealmOptions {
  /** The record the reviewer saw the proposal replace; "" for none. */
  target?: string;
}

export interface ReindexOptions extends CallOptions {
  realm?: string;
  /** Called with each progress line. */
  onProgress?: (progress: ReindexProgress) => void;
}

export const DEFAULT_URL = "http://127.0.0.1:7077";
// The server's own request timeout is 30 s; a little more lets its
// deadline_exceeded answer arrive before the client gives up.
export const DEFAULT_TIMEOUT_MS = 35_000;

// Bytes of an error answer read beyond what its request can have made it:
// the API's error quotes what the request sent (a refused scope, a path), at
// most some 5 bytes for each byte sent once escaped; a longer body (a proxy's
// page) is not the API's, and only its first bytes are kept.
const ERROR_BODY_BYTES = 64 << 10;
const ERROR_BODY_PER_SENT_BYTE = 8;

// Bytes of one reindex line, its newline not counted: the server's lines
// (progress, the result, an error) are a few hundred bytes.
const MAX_LINE_BYTES = 1 << 20;

interface Request {
  method: "GET" | "POST" | "DELETE";
  path: string;
  body?: unknown;
  query?: { [name: string]: string | undefined };
  accept?: number[];
  opts?: CallOptions;
  /** The timeout restarts at touch() (each line of a streamed answer). */
  idle?: boolean;
}

interface Sent {
  res: Response;
  requestId: string;
  /** Restarts an idle timeout; stops the timer when done. */
  touch: () => void;
  done: () => void;
  timedOut: () => boolean;
}

const seg = encodeURIComponent;

function identity(id: IdentityLike): Identity {
  return typeof id === "string" ? { id } : id;
}

function withIdentity<B extends { identity: Identity }>(body: WithIdentity<B>): B {
  const b = body as unknown as { identity: IdentityLike };
  return { ...b, identity: identity(b.identity) } as unknown as B;
}

/**
 * A client of one memhost server. Every call has a timeout (the client's
 * `timeoutMs`, or the call's own) and sends an X-Request-Id; an error answer
 * throws MemhostError, no answer MemhostTransportError. Nothing touches the
 * network before the first call.
 */
export class MemhostClient {
  readonly baseUrl: string;
  // Private, so that logging or serialising a client never shows the token.
  readonly #token: string | undefined;
  readonly timeoutMs: number;
  private readonly newRequestId: () => string;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? DEFAULT_URL).replace(/\/+$/, "");
    // Surrounding whitespace (a token file's newline) goes, as fetch drops
    // it; any other character a header cannot carry is refused here, where
    // the message can leave the token out (fetch's would quote it).
    this.#token = options.token?.trim();
    if (this.#token !== undefined && !/^[\x20-\x7e]*$/.test(this.#token)) {
      throw new TypeError("token has a character other than printable ASCII");
    }
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) throw new RangeError("timeoutMs must be positive");
    this.newRequestId = options.newRequestId ?? (() => crypto.randomUUID());
  }

  /** The bearer token. */
  get token(): string | undefined {
    return this.#token;
  }

  /** A client for the same server with other options. */
  withOptions(options: Omit<ClientOptions, "baseUrl">): MemhostClient {
    return new MemhostClient({
      baseUrl: this.baseUrl,
      token: this.token,
      timeoutMs: this.timeoutMs,
      newRequestId: this.newRequestId,
      ...options,
    });
  }

  // --- records ---------------------------------------------------------

  /** Stores records, all or nothing. An agent token's shared-scope records become proposals (status "proposed"). */
  remember(body: RequestBody<"remember">, opts?: CallOptions): Promise<RememberAnswer> {
    return this.json({ method: "POST", path: "/v1/records", body, opts });
  }

  get(id: string, opts?: RealmOptions): Promise<MemoryRecord> {
    return this.json({ method: "GET", path: `/v1/records/${seg(id)}`, query: { realm: opts?.realm }, opts });
  }

  /** Forgets a record (also one already gone). */
  async forget(id: string, opts?: RealmOptions): Promise<void> {
    await this.json({ method: "DELETE", path: `/v1/records/${seg(id)}`, query: { realm: opts?.realm }, opts });
  }

  /**
   * Approves an agent's proposal (application callers only). `target` is the
   * record the listing showed it replacing ("" for none): if it would now
   * replace another, nothing changes and the answer is 409 `target_changed`.
   */
  approve(id: string, opts?: ApproveOptions): Promise<Answer<"approveRecord">> {
    return this.json({ method: "POST", path: `/v1/records/${seg(id)}/approve`, query: { realm: opts?.realm, target: opts?.target }, opts });
  }

  /** Rejects (forgets) an agent's pending proposal (application callers only). */
  reject(id: string, opts?: RealmOptions): Promise<Answer<"rejectRecord">> {
    return this.json({ method: "POST", path: `/v1/records/${seg(id)}/reject`, query: { realm: opts?.realm }, opts });
  }

  /** A realm's pending proposals, oldest first, each with its proposer and diff. */
  proposals(params: PageParams = {}, opts?: CallOptions): Promise<Answer<"listProposals">> {
    return this.json({ method: "GET", path: "/v1/proposals", query: pageQuery(params), opts });
  }

  /** Lists or searches a realm's records (application callers only). */
  records(params: RecordFilter = {}, opts?: CallOptions): Promise<Answer<"listRecords">> {
    const { limit, ...rest } = params;
    return this.json({ method: "GET", path: "/v1/records", query: { ...rest, limit: limit?.toString() }, opts });
  }

  /** A realm's records per scope and status. */
  scopes(opts?: RealmOptions): Promise<Answer<"scopeCounts">> {
    return this.json({ method: "GET", path: "/v1/scopes", query: { realm: opts?.realm }, opts });
  }

  /** A session's turn trace: what each turn injected and what it left out. */
  trace(session: string, params: TraceParams & { identity?: string } = {}, opts?: CallOptions): Promise<Answer<"sessionTrace">> {
    return this.json({ method: "GET", path: `/v1/sessions/${seg(session)}/trace`, query: { ...traceQuery(params), identity: params.identity }, opts });
  }

  /** A realm's traced sessions, most recent first. */
  traces(params: TraceParams = {}, opts?: CallOptions): Promise<Answer<"listTraces">> {
    return this.json({ method: "GET", path: "/v1/traces", query: traceQuery(params), opts });
  }

  /** The newest turns that injected a record. */
  recordTrace(id: string, params: TraceParams = {}, opts?: CallOptions): Promise<Answer<"recordTrace">> {
    return this.json({ method: "GET", path: `/v1/records/${seg(id)}/trace`, query: traceQuery(params), opts });
  }

  recall(body: WithIdentity<RequestBody<"recall">>, opts?: CallOptions): Promise<Answer<"recall">> {
    return this.json({ method: "POST", path: "/v1/recall", body: withIdentity(body), opts });
  }

  manifest(body: WithIdentity<RequestBody<"manifest">>, opts?: CallOptions): Promise<Answer<"manifest">> {
    return this.json({ method: "POST", path: "/v1/manifest", body: withIdentity(body), opts });
  }

  // --- injection -------------------------------------------------------

  /** Memory to put beside this turn's user message. */
  injectTurn(body: WithIdentity<RequestBody<"injectTurn">>, opts?: CallOptions): Promise<Answer<"injectTurn">> {
    return this.json({ method: "POST", path: "/v1/turns/inject", body: withIdentity(body), opts });
  }

  /** The system-prompt memory block for a new agent build. */
  injectBuild(body: WithIdentity<RequestBody<"injectBuild">>, opts?: CallOptions): Promise<Answer<"injectBuild">> {
    return this.json({ method: "POST", path: "/v1/builds/inject", body: withIdentity(body), opts });
  }

  /** Neutralises forged memory envelopes in inbound content. */
  defang(body: WithIdentity<RequestBody<"defang">>, opts?: CallOptions): Promise<Answer<"defang">> {
    return this.json({ method: "POST", path: "/v1/defang", body: withIdentity(body), opts });
  }

  // --- compaction ------------------------------------------------------

  /** Folds the evicted messages (all of them so far, in order) into the conversation's rolling summary. */
  compact(
    conversationId: string,
    body: WithIdentity<RequestBody<"compactConversation">>,
    opts?: CallOptions,
  ): Promise<Answer<"compactConversation">> {
    const path = `/v1/conversations/${seg(conversationId)}/compact`;
    return this.json({ method: "POST", path, body: withIdentity(body), opts });
  }

  /** Forgets a conversation's summary; an agent names the identity it acts as (it forgets only that identity's). */
  async forgetConversation(conversationId: string, opts?: RealmOptions & { identity?: string }): Promise<void> {
    const path = `/v1/conversations/${seg(conversationId)}`;
    await this.json({ method: "DELETE", path, query: { realm: opts?.realm, identity: opts?.identity }, opts });
  }

  /** Says the session was compacted: its dedup set and byte counter reset. */
  async sessionCompacted(
    session: string,
    body: WithIdentity<RequestBody<"sessionCompacted">>,
    opts?: CallOptions,
  ): Promise<void> {
    await this.json({ method: "POST", path: `/v1/sessions/${seg(session)}/compacted`, body: withIdentity(body), opts });
  }

  // --- memory guide ----------------------------------------------------

  guideSessionStart(
    body: WithIdentity<RequestBody<"guideSessionStart">>,
    opts?: CallOptions,
  ): Promise<Answer<"guideSessionStart">> {
    return this.json({ method: "POST", path: "/v1/guide/session-start", body: withIdentity(body), opts });
  }

  guideBeforeIteration(
    body: WithIdentity<RequestBody<"guideBeforeIteration">>,
    opts?: CallOptions,
  ): Promise<Answer<"guideBeforeIteration">> {
    return this.json({ method: "POST", path: "/v1/guide/before-iteration", body: withIdentity(body), opts });
  }

  // --- archive ---------------------------------------------------------

  /** One page of a realm's full records; follow `next` until it is empty. */
  exportRecords(body: RequestBody<"exportRecords"> = {}, opts?: CallOptions): Promise<Answer<"exportRecords">> {
    return this.json({ method: "POST", path: "/v1/export", body, opts });
  }

  /** Every record of a realm, page by page. */
  async *exportAll(
    body: Omit<RequestBody<"exportRecords">, "after"> = {},
    opts?: CallOptions,
  ): AsyncGenerator<MemoryRecord> {
    let after = "";
    for (;;) {
      const page = await this.exportRecords({ ...body, ...(after ? { after } : {}) }, opts);
      yield* page.records;
      after = page.next;
      if (!after) return;
    }
  }

  /** Stores exported records as they are (ids and times kept), all or nothing. */
  importRecords(body: RequestBody<"importRecords">, opts?: CallOptions): Promise<Answer<"importRecords">> {
    return this.json({ method: "POST", path: "/v1/import", body, opts });
  }

  /**
   * Rebuilds the realm provider's search index. The timeout bounds each wait
   * between progress lines; a failure after streaming began arrives as the
   * last line and is thrown as MemhostError.
   */
  async reindex(opts: ReindexOptions = {}): Promise<ReindexResult> {
    const body = opts.realm ? { realm: opts.realm } : {};
    const path = "/v1/admin/reindex";
    const sent = await this.send({ method: "POST", path, body, opts, idle: true });
    const { res, requestId } = sent;
    const decoder = new TextDecoder();
    let buffered = "";
    // Bytes received since the last newline.
    let pending = 0;
    let callerError: { e: unknown } | undefined;
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    try {
      if (!res.body) throw new MemhostTransportError(`POST ${path}: empty answer`, requestId, false);
      reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        const nlAt = value.lastIndexOf(0x0a);
        pending = nlAt < 0 ? pending + value.length : value.length - nlAt - 1;
        if (pending > MAX_LINE_BYTES) {
          throw new MemhostError(res.status, "unknown", `POST ${path}: bad answer line: longer than 1 MiB`, requestId);
        }
        buffered += decoder.decode(value, { stream: true });
        let nl: number;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          // A new period per complete line: bytes dribbled without a
          // newline do not keep the call alive.
          sent.touch();
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (!line) continue;
          const item = JSON.parse(line) as ReindexLine | null;
          if (typeof item !== "object" || item === null || Array.isArray(item)) {
            throw new MemhostError(res.status, "unknown", `POST ${path}: bad answer line: not a JSON object`, requestId);
          }
          if (item.progress) {
            try {
              opts.onProgress?.(item.progress);
            } catch (e) {
              callerError = { e };
              throw e;
            }
          } else if (item.result) return item.result;
          else if (item.error) throw MemhostError.fromObject(res.status, item.error, requestId);
        }
      }
    } catch (e) {
      // What the caller's onProgress threw is the caller's: passed on as it is.
      if (callerError) throw callerError.e;
      throw this.transport(e, "POST", path, sent);
    } finally {
      sent.done();
      // Left by a result, an error line, a bad line or a throwing
      // onProgress, the stream would hold its connection open (the timer
      // that would end it is stopped): close it.
      await reader?.cancel().catch(() => undefined);
    }
    throw new MemhostTransportError(`POST ${path}: the answer ended without a result`, requestId, false);
  }

  // --- operations ------------------------------------------------------

  plugins(opts?: CallOptions): Promise<Answer<"plugins">> {
    return this.json({ method: "GET", path: "/v1/plugins", opts });
  }

  /** Liveness: true when the server answers. */
  async healthz(opts?: CallOptions): Promise<boolean> {
    await this.json({ method: "GET", path: "/healthz", opts });
    return true;
  }

  /** Readiness: a server whose plugins are not all up answers ready: false (not an exception). */
  async readyz(opts?: CallOptions): Promise<Readiness> {
    const { status, body } = await this.call<{ status?: string; plugins?: PluginStatus[] }>({
      method: "GET",
      path: "/readyz",
      accept: [503],
      opts,
    });
    const ready: Readiness = { ready: status === 200, status: String(body?.status ?? "") };
    if (body?.plugins) ready.plugins = body.plugins;
    return ready;
  }

  /** The Prometheus text exposition. */
  async metrics(opts?: CallOptions): Promise<string> {
    const sent = await this.send({ method: "GET", path: "/metrics", opts });
    return this.text(sent, "GET", "/metrics");
  }

  // --- transport -------------------------------------------------------

  private async json<T>(req: Request): Promise<T> {
    return (await this.call<T>(req)).body as T;
  }

  /** Sends a request; answers its status and decoded JSON (undefined when empty). */
  private async call<T>(req: Request): Promise<{ status: number; body: T | undefined }> {
    const sent = await this.send(req);
    const text = await this.text(sent, req.method, req.path);
    if (!text) return { status: sent.res.status, body: undefined };
    try {
      return { status: sent.res.status, body: JSON.parse(text) as T };
    } catch (e) {
      throw new MemhostError(sent.res.status, "unknown", `${req.method} ${req.path}: answer is not JSON: ${String(e)}`, sent.requestId);
    }
  }

  /** Sends a request and answers the open response; a status >= 400 outside `accept` throws the API's error. */
  private async send(req: Request): Promise<Sent> {
    const timeoutMs = req.opts?.timeoutMs ?? this.timeoutMs;
    const requestId = req.opts?.requestId ?? this.newRequestId();
    const timer = new AbortController();
    let timedOut = false;
    let handle: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(handle);
      handle = setTimeout(() => {
        timedOut = true;
        timer.abort(new DOMException("timed out", "TimeoutError"));
      }, timeoutMs);
    };
    arm();
    const sent: Sent = {
      res: undefined as unknown as Response,
      requestId,
      touch: () => (req.idle ? arm() : undefined),
      done: () => clearTimeout(handle),
      timedOut: () => timedOut,
    };
    const signal = req.opts?.signal ? AbortSignal.any([timer.signal, req.opts.signal]) : timer.signal;
    const headers: { [name: string]: string } = { Accept: "application/json", "X-Request-Id": requestId };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    let payload: string | undefined;
    if (req.body !== undefined) {
      payload = JSON.stringify(req.body);
      headers["Content-Type"] = "application/json";
    }
    let url = this.baseUrl + req.path;
    const query = new URLSearchParams();
    // An empty target is a value: the reviewer saw the proposal replace no record.
    for (const [k, v] of Object.entries(req.query ?? {})) if (v || (k === "target" && v === "")) query.set(k, v);
    if (query.size > 0) url += `?${query}`;
    try {
      // memhost answers no redirect, and following one would send the
      // request's body to whatever host the Location names (and turn a
      // POST into a GET): a 3xx is an error instead.
      sent.res = await fetch(url, { method: req.method, headers, body: payload, signal, redirect: "manual" });
    } catch (e) {
      sent.done();
      throw this.transport(e, req.method, req.path, sent);
    }
    sent.requestId = sent.res.headers.get("X-Request-Id") ?? requestId;
    if (sent.res.status >= 300 && sent.res.status < 400 && !req.accept?.includes(sent.res.status)) {
      sent.done();
      await sent.res.body?.cancel().catch(() => undefined);
      const where = sent.res.headers.get("Location") || "elsewhere";
      throw new MemhostError(sent.res.status, "unknown", `${req.method} ${req.path}: HTTP ${sent.res.status} redirect to ${where} not followed`, sent.requestId);
    }
    if (sent.res.status >= 400 && !req.accept?.includes(sent.res.status)) {
      const retryAfter = retryAfterSeconds(sent.res.headers.get("Retry-After"));
      const limit = ERROR_BODY_BYTES + ERROR_BODY_PER_SENT_BYTE * (Buffer.byteLength(url) + Buffer.byteLength(payload ?? ""));
      throw MemhostError.fromBody(sent.res.status, await this.text(sent, req.method, req.path, limit), sent.requestId, retryAfter);
    }
    return sent;
  }

  /** Reads a whole answer (its first `limit` bytes, when given) within the call's timeout. */
  private async text(sent: Sent, method: string, path: string, limit?: number): Promise<string> {
    try {
      if (limit === undefined || !sent.res.body) return await sent.res.text();
      const reader = sent.res.body.getReader();
      const chunks: Uint8Array[] = [];
      let size = 0;
      try {
        while (size < limit) {
          const { done, value } = await reader.read();
          if (done) break;
          chunks.push(value);
          size += value.length;
        }
      } finally {
        // The rest, if any, is not read: closing the stream drops the connection.
        await reader.cancel().catch(() => undefined);
      }
      return Buffer.concat(chunks).subarray(0, limit).toString("utf8");
    } catch (e) {
      throw this.transport(e, method, path, sent);
    } finally {
      sent.done();
    }
  }

  private transport(e: unknown, method: string, path: string, sent: Sent): Error {
    if (e instanceof MemhostError || e instanceof MemhostTransportError) return e;
    if (e instanceof SyntaxError) {
      return new MemhostError(sent.res?.status ?? 0, "unknown", `${method} ${path}: bad answer line: ${e.message}`, sent.requestId);
    }
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    const reason = sent.timedOut()
      ? "timed out"
      : cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
    return new MemhostTransportError(`${method} ${path}: ${reason}`, sent.requestId, sent.timedOut(), { cause: e });
  }
}

type MethodName = {
  [K in keyof MemhostClient]: MemhostClient[K] extends (...args: never[]) => unknown ? K : never;
}[keyof MemhostClient];

/**
 * The client method performing each API operation: its operationId in
 * docs/openapi.yaml, or "METHOD /path" for one without. Every operationId
 * must be listed (the compiler holds it to the generated schema), and a test
 * holds the whole table to clients/operations.json. null: left to other
 * tools (NOT_COVERED says why).
 */
export const OPERATIONS = {
  remember: "remember",
  getRecord: "get",
  forgetRecord: "forget",
  approveRecord: "approve",
  rejectRecord: "reject",
  listProposals: "proposals",
  listRecords: "records",
  scopeCounts: "scopes",
  sessionTrace: "trace",
  listTraces: "traces",
  recordTrace: "recordTrace",
  recall: "recall",
  manifest: "manifest",
  injectTurn: "injectTurn",
  injectBuild: "injectBuild",
  defang: "defang",
  compactConversation: "compact",
  forgetConversation: "forgetConversation",
  sessionCompacted: "sessionCompacted",
  guideSessionStart: "guideSessionStart",
  guideBeforeIteration: "guideBeforeIteration",
  exportRecords: "exportRecords",
  importRecords: "importRecords",
  reindex: "reindex",
  plugins: "plugins",
  mcp: null,
  "GET /healthz": "healthz",
  "GET /readyz": "readyz",
  "GET /metrics": "metrics",
} as const satisfies { [K in keyof operations]: MethodName | null } & { [key: string]: MethodName | null };

export const NOT_COVERED: { [key: string]: string } = {
  mcp: "JSON-RPC for Model Context Protocol clients: use an MCP SDK against /mcp",
};
