// Install the built package into a node_modules directory under both of its names:
// `belvedir` and `@fractalresearch/loop` (the Fractal-era name), the same dist/ in each, so a
// harness written against either imports the same code. Their dependencies are not copied:
// put this next to the lockfile's tree (`npm ci --omit=dev`), as the sandbox image does.
//
//   node scripts/stage.mjs <node_modules dir>
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const NAMES = ["belvedir", "@fractalresearch/loop"];

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export function stage(target) {
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  for (const name of NAMES) {
    const dir = join(target, ...name.split("/"));
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    cpSync(join(root, "dist"), join(dir, "dist"), { recursive: true });
    cpSync(join(root, "README.md"), join(dir, "README.md"));
    const { devDependencies: _dev, scripts: _scripts, ...published } = manifest;
    writeFileSync(join(dir, "package.json"), `${JSON.stringify({ ...published, name }, null, 2)}\n`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (!process.argv[2]) {
    console.error("usage: node scripts/stage.mjs <node_modules dir>");
    process.exit(2);
  }
  stage(resolve(process.argv[2]));
}
