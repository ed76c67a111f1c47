/** The API's error codes (docs/api.md); a newer server may answer others. */
export type ErrorCode =
  | "invalid_argument"
  | "unauthenticated"
  | "permission_denied"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "history_mismatch"
  | "target_changed"
  | "too_large"
  | "too_many_requests"
  | "too_many_proposals"
  | "unsupported"
  | "compaction_failed"
  | "compaction_empty"
  | "compaction_too_large"
  | "unavailable"
  | "provider_unavailable"
  | "deadline_exceeded"
  | "storage_full"
  | "read_only"
  | "internal"
  // An answer that is not the API's error shape (a proxy's page, say).
  | "unknown"
  | (string & {});

/** The body of an error answer (also a reindex stream's error line). */
export interface ErrorObject {
  code: string;
  message: string;
  request_id?: string;
  field?: string;
}

/** An error answer of the memhost API: `{"error": {"code", "message", ...}}`. */
export class MemhostError extends Error {
  override readonly name = "MemhostError";
  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The API's stable code; branch on it. */
    readonly code: ErrorCode,
    message: string,
    /** The request's X-Request-Id, also in every server log line it caused. */
    readonly requestId: string | undefined,
    /** The refused request field, when the refusal names one (`records[1].body`). */
    readonly field?: string,
    /** Seconds to wait before retrying: a 429's or 503's Retry-After, when it has one. */
    readonly retryAfter?: number,
  ) {
    super(`${code}: ${message}${requestId ? ` (request ${requestId})` : ""}`);
    this.apiMessage = message;
  }
  /** The server's message alone, without code and request id. */
  readonly apiMessage: string;

  static fromObject(status: number, error: unknown, requestId: string | undefined, retryAfter?: number): MemhostError {
    if (typeof error !== "object" || error === null || typeof (error as ErrorObject).code !== "string") {
      return new MemhostError(status, "unknown", `HTTP ${status} without an error body`, requestId, undefined, retryAfter);
    }
    const e = error as ErrorObject;
    return new MemhostError(status, e.code, String(e.message ?? ""), e.request_id || requestId, e.field, retryAfter);
  }

  static fromBody(status: number, text: string, requestId: string | undefined, retryAfter?: number): MemhostError {
    let decoded: unknown;
    try {
      decoded = JSON.parse(text);
    } catch {
      decoded = undefined;
    }
    if (typeof decoded === "object" && decoded !== null && "error" in decoded) {
      return MemhostError.fromObject(status, (decoded as { error: unknown }).error, requestId, retryAfter);
    }
    const head = text.slice(0, 200).trim();
    return new MemhostError(status, "unknown", head ? `HTTP ${status}: ${head}` : `HTTP ${status}`, requestId, undefined, retryAfter);
  }
}

/** A Retry-After's seconds; undefined for none, or for an HTTP date (memhost sends seconds). */
export function retryAfterSeconds(value: string | null): number | undefined {
  const v = value?.trim() ?? "";
  return /^[0-9]+$/.test(v) ? Number(v) : undefined;
}

/** The request got no (complete) answer: connection refused or reset, a timeout, or an abort. */
export class MemhostTransportError extends Error {
  override readonly name = "MemhostTransportError";
  constructor(
    message: string,
    /** The X-Request-Id the client sent. */
    readonly requestId: string,
    /** Whether the client's timeout ended the request. */
    readonly timedOut: boolean,
    options?: { cause?: unknown },
  ) {
    super(`${message} (request ${requestId})`, options);
  }
}
