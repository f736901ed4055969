// The platform's watch and embed pages run the SDK's <live-player>: inside the repository,
// the build compiles the player's ES module once more without its comments
// (tsconfig.asset.json: 1.6 KB less, gzip-compressed, in the pages component) and copies
// it to static/live-player.js, which the pages component embeds (its build.rs). Outside
// the repository (the package installed or packed elsewhere) there is nothing to copy to.
import { execFileSync } from "node:child_process";
import { copyFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const repo = new URL("../../../", import.meta.url);
if (existsSync(new URL("components/pages/build.rs", repo))) {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const config = fileURLToPath(new URL("../tsconfig.asset.json", import.meta.url));
  execFileSync(process.execPath, [tsc, "-p", config], { stdio: "inherit" });
  await copyFile(new URL("../dist/asset/player/index.js", import.meta.url), new URL("static/live-player.js", repo));
}
