// What the browser scripts share: where the npm packages are (BF_BROWSER_MODULES, else
// ./node_modules beside the scripts: the tests install one cached copy with `npm ci --prefix`),
// how a script gives up (a message on stderr, exit 2), and Debian's headless Chromium launched
// through playwright-core (BF_CHROMIUM, else /usr/bin/chromium).
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const modules = path.resolve(process.env.BF_BROWSER_MODULES || path.join(here, 'node_modules'));

/** Stops `script` with `msg`: the file, the modules or the browser could not be used. */
export function die(script, msg) {
  process.stderr.write(`${script}: ${msg}\n`);
  process.exit(2);
}

/** A module of the npm packages by its path under `node_modules` (an explicit file, not a bare
 * specifier, so one cached install serves every checkout). */
export async function load(script, file) {
  try {
    return await import(pathToFileURL(path.join(modules, file)).href);
  } catch (e) {
    die(script, `cannot load ${file} from ${modules} (run npm ci there): ${e.message}`);
  }
}

/** Chromium, headless, or `script` stops saying why. */
export async function launch(script) {
  const { chromium } = await load(script, path.join('playwright-core', 'index.mjs'));
  try {
    return await chromium.launch({
      executablePath: process.env.BF_CHROMIUM || '/usr/bin/chromium',
      args: ['--no-sandbox'], // root in a container: the setuid sandbox cannot start
      timeout: 60_000,
    });
  } catch (e) {
    die(script, `cannot launch chromium: ${e.message}`);
  }
}
