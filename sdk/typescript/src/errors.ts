// Errors a plugin throws, and how they travel to the host. Each class is
// one stable memhost code; the server answers it as the gRPC status the
// host maps back (docs/protocol.md, "Errors"). A FieldError also names
// the refused field, as a google.rpc.BadRequest detail.

import { status as Status } from "@grpc/grpc-js";

// The detail messages are encoded by hand: four tiny messages, so the
// SDK needs no google.rpc types.

function varint(n: number): Buffer {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n = Math.floor(n / 128);
    if (n) {
      out.push(b | 0x80);
    } else {
      out.push(b);
      return Buffer.from(out);
    }
  }
}

// A length-delimited field (wire type 2).
function field(num: number, payload: string | Buffer): Buffer {
  const data = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  return Buffer.concat([varint((num << 3) | 2), varint(data.length), data]);
}

function any(typeName: string, value: Buffer): Buffer {
  return Buffer.concat([field(1, "type.googleapis.com/" + typeName), field(2, value)]);
}

/** A serialised google.rpc.Status for the grpc-status-details-bin trailer. */
export function statusDetails(code: Status, message: string, details: Buffer[]): Buffer {
  const parts = code ? [varint(1 << 3), varint(code)] : [];
  parts.push(field(2, message), ...details.map((d) => field(3, d)));
  return Buffer.concat(parts);
}

/** The base of every error with a memhost code. */
export class MemhostError extends Error {
  code = "internal";
  grpcCode: Status = Status.UNKNOWN;
  details(): Buffer[] {
    return [];
  }
}

function coded(name: string, code: string, grpcCode: Status) {
  const cls = class extends MemhostError {
    constructor(message: string) {
      super(message);
      this.name = name;
      this.code = code;
      this.grpcCode = grpcCode;
    }
  };
  Object.defineProperty(cls, "name", { value: name });
  return cls;
}

export const InvalidArgument = coded("InvalidArgument", "invalid_argument", Status.INVALID_ARGUMENT);
export const TooLarge = coded("TooLarge", "too_large", Status.OUT_OF_RANGE);
export const NotFound = coded("NotFound", "not_found", Status.NOT_FOUND);
export const Conflict = coded("Conflict", "conflict", Status.ALREADY_EXISTS);
export const Unsupported = coded("Unsupported", "unsupported", Status.UNIMPLEMENTED);
export const Unavailable = coded("Unavailable", "unavailable", Status.UNAVAILABLE);
export const DeadlineExceeded = coded("DeadlineExceeded", "deadline_exceeded", Status.DEADLINE_EXCEEDED);
export const Cancelled = coded("Cancelled", "cancelled", Status.CANCELLED);
export const PermissionDenied = coded("PermissionDenied", "permission_denied", Status.PERMISSION_DENIED);
export const ReadOnly = coded("ReadOnly", "read_only", Status.FAILED_PRECONDITION);

/** The disk or quota is full; it travels with an ErrorInfo that tells it
 * from gRPC's own RESOURCE_EXHAUSTED for an oversized message. */
export class StorageFull extends MemhostError {
  constructor(message: string) {
    super(message);
    this.name = "StorageFull";
    this.code = "storage_full";
    this.grpcCode = Status.RESOURCE_EXHAUSTED;
  }
  override details(): Buffer[] {
    return [any("google.rpc.ErrorInfo", Buffer.concat([field(1, "STORAGE_FULL"), field(2, "memhost")]))];
  }
}

/** e as the memhost error it stands for: a system error of a full disk or
 * quota or file-size limit (ENOSPC, EDQUOT, EFBIG), or an error caused by one (its cause, as Go's
 * %w), is StorageFull, of a read-only store (EROFS) ReadOnly, so the host
 * answers the operator's problem, not an internal error; anything else is
 * e. */
export function classify(e: unknown): unknown {
  if (!(e instanceof Error)) return e;
  const seen = new Set<unknown>();
  for (let c: unknown = e; c instanceof Error && !(c instanceof MemhostError) && !seen.has(c); c = c.cause) {
    seen.add(c);
    const code = (c as NodeJS.ErrnoException).code;
    if (code === "ENOSPC" || code === "EDQUOT" || code === "EFBIG") return new StorageFull(e.message);
    if (code === "EROFS") return new ReadOnly(e.message);
  }
  return e;
}

/** A bad request or record field: invalid, or too large. field is its
 * path ("records[2].title"). */
export class FieldError extends MemhostError {
  constructor(
    readonly field: string,
    readonly problem: string,
    readonly tooLarge = false,
  ) {
    super(field + ": " + problem);
    this.name = "FieldError";
    this.code = tooLarge ? "too_large" : "invalid_argument";
    this.grpcCode = tooLarge ? Status.OUT_OF_RANGE : Status.INVALID_ARGUMENT;
  }

  /** The same problem re-homed under a request path. */
  prefixed(prefix: string): FieldError {
    return new FieldError(prefix + "." + this.field, this.problem, this.tooLarge);
  }

  override details(): Buffer[] {
    const violation = Buffer.concat([field(1, this.field), field(2, this.problem)]);
    return [any("google.rpc.BadRequest", field(1, violation))];
  }
}

export function invalid(field: string, problem: string): FieldError {
  return new FieldError(field, problem);
}

export function tooLarge(field: string, problem: string): FieldError {
  return new FieldError(field, problem, true);
}

/** Runs fn, re-homing a FieldError it throws under prefix. */
export function under<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw e instanceof FieldError ? e.prefixed(prefix) : e;
  }
}
