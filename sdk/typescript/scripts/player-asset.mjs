// The platform's watch and embed pages run the SDK's <live-player>: inside the repository,
// the build copies the player's ES module to static/live-player.js, which the pages
// component embeds (its build.rs). Outside the repository (the package installed or
// packed elsewhere) there is nothing to copy to.
import { copyFile } from "node:fs/promises";
import { existsSync } from "node:fs";

const repo = new URL("../../../", import.meta.url);
if (existsSync(new URL("components/pages/build.rs", repo))) {
  await copyFile(new URL("../dist/esm/player/index.js", import.meta.url), new URL("static/live-player.js", repo));
}
