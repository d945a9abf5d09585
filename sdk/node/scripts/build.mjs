// Build dist/: the ES module build (dist/esm) and the CommonJS build (dist/cjs, marked
// "type": "commonjs" so Node reads its .js files as CommonJS), each with its declarations.
// `npm run build`; dist/ is committed, and a test checks it is what this script makes.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = process.argv[2] ? resolve(process.argv[2]) : join(root, "dist");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");

rmSync(out, { recursive: true, force: true });
for (const [config, dir] of [
  ["tsconfig.json", "esm"],
  ["tsconfig.cjs.json", "cjs"],
]) {
  execFileSync(process.execPath, [tsc, "-p", join(root, config), "--outDir", join(out, dir)], {
    stdio: "inherit",
  });
}
mkdirSync(join(out, "cjs"), { recursive: true });
writeFileSync(join(out, "cjs", "package.json"), '{\n  "type": "commonjs"\n}\n');
