// Starting a plugin process as the host does, and calling it: shared by
// the SDK's process tests.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import * as grpc from "@grpc/grpc-js";

import { loadProto } from "../src/server.js";

export const MEMPLUGIN = fileURLToPath(new URL("./memplugin.js", import.meta.url));
export const EXAMPLE = fileURLToPath(new URL("../examples/jsonl.js", import.meta.url));
export const COOKIE = { MEMHOST_PLUGIN_COOKIE: "5f0c0a3e9d2b4c71a8e6f3b2d9c4e1a7" };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Wire = any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const pb = (grpc.loadPackageDefinition(loadProto()) as any).memhost.plugin.v1;

export interface Started {
  proc: ChildProcessWithoutNullStreams;
  line: string[];
  stderr: string[];
  sockets: string;
}

/** Starts script with the cookie and a fresh socket directory, and reads
 * its handshake line ("" when it exits first). */
export async function start(script: string, env: { [k: string]: string } = {}): Promise<Started> {
  const sockets = mkdtempSync(join(tmpdir(), "mhsock-"));
  const proc = spawn(process.execPath, [script], { env: { ...process.env, PLUGIN_UNIX_SOCKET_DIR: sockets, ...COOKIE, ...env } });
  const stderr: string[] = [];
  createInterface({ input: proc.stderr }).on("line", (l) => stderr.push(l));
  const first = await new Promise<string>((resolve) => {
    createInterface({ input: proc.stdout }).once("line", resolve);
    proc.once("exit", () => resolve(""));
  });
  return { proc, line: first.split("|"), stderr, sockets };
}

export function stop(s: Started): void {
  if (s.proc.exitCode === null) s.proc.kill("SIGKILL");
  rmSync(s.sockets, { recursive: true, force: true });
}

export const exited = (s: Started) =>
  new Promise<number | null>((resolve) => (s.proc.exitCode !== null ? resolve(s.proc.exitCode) : s.proc.once("exit", resolve)));

export function unary(client: Wire, method: string, req: Wire, metadata = new grpc.Metadata()): Promise<Wire> {
  return new Promise((resolve, reject) =>
    client[method](req, metadata, { deadline: Date.now() + 10_000 }, (err: Error | null, res: Wire) => (err ? reject(err) : resolve(res))));
}

export function stream(client: Wire, method: string, req: Wire): Promise<Wire[]> {
  return new Promise((resolve, reject) => {
    const out: Wire[] = [];
    const call = client[method](req, { deadline: Date.now() + 10_000 });
    call.on("data", (m: Wire) => out.push(m));
    call.on("error", reject);
    call.on("end", () => resolve(out));
  });
}

export async function failure(p: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await p;
  } catch (e) {
    return e as grpc.ServiceError;
  }
  assert.fail("the call succeeded");
}

export const details = (e: grpc.ServiceError) =>
  Buffer.concat(e.metadata.get("grpc-status-details-bin") as Buffer[]).toString("latin1");

export const channelOptions = { "grpc.ssl_target_name_override": "localhost", "grpc.default_authority": "localhost" };

export function clients(address: string, creds = grpc.credentials.createInsecure()) {
  const plugin = new pb.Plugin("unix:" + address, creds, channelOptions);
  const provider = new pb.Provider("unix:" + address, creds, channelOptions);
  return { plugin, provider, close: () => (plugin.close(), provider.close()) };
}

/** Asks the plugin to shut down, as the host's Kill does. */
export async function shutdown(s: Started): Promise<number | null> {
  const controller = new grpc.Client("unix:" + s.line[3], grpc.credentials.createInsecure());
  try {
    await new Promise<void>((resolve, reject) =>
      controller.makeUnaryRequest("/plugin.GRPCController/Shutdown", (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0),
        (err) => (err ? reject(err) : resolve())));
  } finally {
    controller.close();
  }
  return exited(s);
}
