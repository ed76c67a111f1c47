#!/usr/bin/env node
// memhost-plugin-tree OUT PATH...: lays out a Node plugin as the script
// tree memhost's plugin directory holds (docs/plugins.md, "Interpreted
// plugins"). Run it in the plugin's package directory: OUT receives the
// package.json, each PATH (the compiled code, relative to the package),
// and every production dependency from node_modules, links followed and
// without .bin (a tree may hold no symbolic link). Files starting with
// "#!" become executable.
import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

const [out, ...paths] = process.argv.slice(2);
if (!out || !paths.length) {
  console.error("usage: memhost-plugin-tree OUT PATH...  (in the plugin's package directory)");
  process.exit(2);
}
if (existsSync(out)) {
  console.error(`memhost-plugin-tree: ${out} exists; remove it first`);
  process.exit(1);
}
const root = process.cwd();
// Every production package, nested ones included, the root first.
const listed = execFileSync("npm", ["ls", "--omit=dev", "--all", "--parseable"], { cwd: root, encoding: "utf8" });
const deps = listed.split("\n").filter(Boolean).slice(1);
for (const dir of deps) {
  const rel = relative(root, dir);
  if (rel.startsWith("..") || !rel.startsWith("node_modules" + sep)) {
    console.error(`memhost-plugin-tree: dependency ${dir} is outside ${root}/node_modules (a linked package: install it with --install-links)`);
    process.exit(1);
  }
  // A package's own node_modules holds packages listed on their own.
  cpSync(dir, join(out, rel), {
    recursive: true, dereference: true,
    filter: (src) => !relative(dir, src).split(sep).some((part) => part === "node_modules" || part === ".bin"),
  });
}
for (const p of ["package.json", ...paths]) cpSync(join(root, p), join(out, p), { recursive: true, dereference: true });

function markScripts(p) {
  if (statSync(p).isDirectory()) {
    for (const name of readdirSync(p)) markScripts(join(p, name));
  } else if (readFileSync(p).subarray(0, 2).toString() === "#!") {
    chmodSync(p, 0o755);
  }
}
for (const p of paths) markScripts(join(out, p));
