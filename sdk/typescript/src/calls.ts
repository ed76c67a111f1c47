// What a plugin's code may know of the host call it serves: its deadline.
// The server sets it around each call (server.ts run).

import { AsyncLocalStorage } from "node:async_hooks";
import { DeadlineExceeded } from "./errors.js";

/** The time (ms since the epoch) the current call's deadline falls at;
 * undefined outside a call, or for a call without one. */
export const callDeadline = new AsyncLocalStorage<number | undefined>();

/** Milliseconds left before the current call's deadline (undefined: no deadline). */
export function timeRemaining(): number | undefined {
  const d = callDeadline.getStore();
  return d === undefined ? undefined : d - Date.now();
}

/** Throws DeadlineExceeded once the current call's deadline passed: the
 * host has answered its caller already, so work begun now (a write that
 * waited for a lock, say) would change what the caller was told failed. */
export function checkDeadline(): void {
  const left = timeRemaining();
  if (left !== undefined && left <= 0) throw new DeadlineExceeded("the call's deadline passed before its work began");
}
