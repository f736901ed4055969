// dist/cjs holds CommonJS in a "type": "module" package: this marks the folder as such.
import { writeFile } from "node:fs/promises";
await writeFile(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
