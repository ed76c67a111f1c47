// The message conversions are written by hand (no code is generated from
// plugin.proto): each test here fails when a field added to the .proto is
// not carried, so an SDK built from a newer .proto cannot silently drop a
// record's field on its way through a plugin.
import assert from "node:assert/strict";
import { test } from "node:test";

import { loadProto, recordFromWire, recordToWire } from "../src/server.js";

interface Field {
  name: string;
  type: string;
  label: string;
  typeName: string;
}

const fieldsOf = (message: string) =>
  (loadProto()[`memhost.plugin.v1.${message}`] as unknown as { type: { field: Field[] } }).type.field;

// A distinct value for every field of message, as proto-loader decodes it.
function sample(message: string, seed = 1): { [k: string]: unknown } {
  const out: { [k: string]: unknown } = {};
  fieldsOf(message).forEach((f, i) => {
    const n = seed * 100 + i + 1;
    let v: unknown;
    if (f.type === "TYPE_STRING") v = `${f.name}-${n}`;
    else if (f.type === "TYPE_MESSAGE") v = sample(f.typeName.split(".").at(-1)!, n);
    else if (f.type === "TYPE_DOUBLE") v = n + 0.5;
    else v = n;
    out[f.name] = f.label === "LABEL_REPEATED" ? [v, v] : v;
  });
  return out;
}

test("every field of Record survives recordFromWire and recordToWire", () => {
  const wire = sample("Record");
  assert.deepEqual(recordToWire(recordFromWire(wire)), wire,
    "a field of plugin.proto's Record is not carried by src/server.ts (recordFromWire, recordToWire) and src/records.ts (Record)");
});

test("every field of RecordInput is read by recordFromWire", () => {
  const wire = sample("RecordInput");
  const back = recordToWire(recordFromWire(wire));
  for (const name of Object.keys(wire)) assert.deepEqual(back[name], wire[name], `RecordInput.${name} is dropped`);
});
