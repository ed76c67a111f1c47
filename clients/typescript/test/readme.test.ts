// The README's examples (test/readme.gen.ts), run against the live server.
import assert from "node:assert/strict";
import { it } from "node:test";

import { live } from "./live.js";
import { blocks, runReadme } from "./readme.gen.js";

it("README examples run", async () => {
  const env = live();
  assert.ok(blocks >= 8, `README ts blocks: ${blocks}`);
  process.env.MEMHOST_URL = env.url;
  process.env.MEMHOST_TOKEN = env.appToken;
  process.env.MEMHOST_AGENT_TOKEN = env.agentToken;
  // The examples check with console.assert, which only prints: make it throw.
  const original = console.assert;
  console.assert = (condition?: boolean, ...data: unknown[]) => {
    if (!condition) throw new assert.AssertionError({ message: `README assertion failed ${data.join(" ")}` });
  };
  try {
    await runReadme();
  } finally {
    console.assert = original;
  }
});
