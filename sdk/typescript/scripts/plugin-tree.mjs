#!/usr/bin/env node
// memhost-plugin-tree OUT ENTRY [PATH...]: lays out a Node plugin as the
// script tree memhost's plugin directory holds (docs/plugins.md,
// "Interpreted plugins"). Run it in the plugin's package directory: OUT
// receives the package.json, ENTRY and each PATH (compiled code, relative
// to the package), every production dependency from node_modules, links
// followed and without .bin (a tree may hold no symbolic link), and
// main.mjs, the executable entry script at the tree's top that memhost
// plugins manifest wants, which imports ENTRY.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";

const [out, entry, ...paths] = process.argv.slice(2);
if (!out || !entry) {
  console.error("usage: memhost-plugin-tree OUT ENTRY [PATH...]  (in the plugin's package directory)");
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
for (const p of ["package.json", entry, ...paths]) cpSync(join(root, p), join(out, p), { recursive: true, dereference: true });
const target = "./" + relative(root, join(root, entry)).split(sep).join("/");
writeFileSync(join(out, "main.mjs"), `#!/usr/bin/env node\nimport ${JSON.stringify(target)};\n`, { mode: 0o755 });
