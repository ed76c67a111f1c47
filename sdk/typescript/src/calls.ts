// What a plugin's code may know of the host call it serves: its deadline,
// and whether the host ended it already. The server sets them around each
// call (server.ts run).

import { AsyncLocalStorage } from "node:async_hooks";
import { Cancelled, DeadlineExceeded } from "./errors.js";

/** The time (ms since the epoch) the current call's deadline falls at;
 * undefined outside a call, or for a call without one. */
export const callDeadline = new AsyncLocalStorage<number | undefined>();

/** ended turns true once the host ended the current call (it cancelled
 * it, or its deadline passed); undefined outside a call. */
export const callEnded = new AsyncLocalStorage<{ ended: boolean }>();

/** Milliseconds left before the current call's deadline (undefined: no deadline). */
export function timeRemaining(): number | undefined {
  const d = callDeadline.getStore();
  return d === undefined ? undefined : d - Date.now();
}

/** Throws DeadlineExceeded once the current call's deadline passed, and
 * Cancelled once the host cancelled it, as sdk.ContextErr does: the host
 * has answered its caller or given up already, so work begun now (a write
 * that waited for a lock, say) would change what the caller was told
 * failed, or was never told at all. */
export function checkDeadline(): void {
  const left = timeRemaining();
  if (left !== undefined && left <= 0) throw new DeadlineExceeded("the call's deadline passed before its work began");
  if (callEnded.getStore()?.ended) throw new Cancelled("the call was cancelled before its work began");
}
