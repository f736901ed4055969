// npm's `prepare`: builds dist/ whenever the package is installed from its folder or a git
// checkout, packed, or set up with `npm ci`, so that `npm install ./sdk/typescript` gives a
// package that loads. The build needs the locked devDependencies (TypeScript). A folder
// installed into another project has none, so they are installed first, exactly as
// package-lock.json says (`npm ci`), from npm's cache when it has them (with no network
// under `--offline`, which npm passes down to this script).
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// The npm that runs this script (npm_execpath), as Node runs it: no shell, on any system.
const npm = (...args) => {
  const cli = process.env.npm_execpath;
  const [command, argv] = cli ? [process.execPath, [cli, ...args]] : ["npm", args];
  execFileSync(command, argv, { cwd: root, stdio: "inherit" });
};

if (!existsSync(join(root, "node_modules", "typescript", "package.json"))) {
  // --ignore-scripts: this script is the one `npm ci` would run.
  npm("ci", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund");
}
npm("run", "build");
