// Bundle src/graphview.js with cytoscape.js and KaTeX into ONE ES module that the wheel carries:
// asgteach/widgets/bundle/graphview.js. anywidget loads it from the kernel; nothing is fetched from
// a CDN and no JupyterLab extension of ours is needed.
//
//   cd js && npm ci && npm run build
//
// The versions are pinned by package-lock.json and the output is deterministic (no timestamps,
// no absolute paths), so tests/test_widget_bundle.py can check that the committed bundle is what
// this build makes from the committed sources.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] || path.join(here, "..", "asgteach", "widgets", "bundle", "graphview.js");

await build({
  entryPoints: [path.join(here, "src", "graphview.js")],
  outfile: out,
  bundle: true,
  format: "esm",
  minify: true,
  target: ["es2020"],
  legalComments: "eof",   // cytoscape's and KaTeX's licence notices stay in the bundle
  charset: "utf8",
  logLevel: "warning",
});
console.log(`built ${path.relative(process.cwd(), out)}`);
