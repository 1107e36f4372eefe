// Writes src/generated/tools.ts from api/tools.json: the agent tools'
// descriptions and their arguments', written once for the MCP server and
// both SDKs, as the TypeScript tools show them to a model.
//
//   node scripts/gen-tools.mjs             write src/generated/tools.ts (npm run gen)
//   node scripts/gen-tools.mjs --check [F] exit 1 when F (default that file) is stale
//
// check-gen.mjs runs the check too, so `npm test` fails on a stale copy.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const toolsJSON = join(root, "..", "..", "api", "tools.json");
export const generated = join(root, "src", "generated", "tools.ts");
const SURFACE = "typescript";

// A text of tools.json (a string, or a list of parts, each a string or
// {only, text}) as this surface shows it, its placeholders filled.
function resolve(text, words) {
  const parts = typeof text === "string" ? [text] : (text ?? []);
  let out = "";
  for (const p of parts) {
    if (typeof p === "string") out += p;
    else if ((p.only ?? [SURFACE]).includes(SURFACE)) out += p.text;
  }
  return out.replace(/\{([a-z_]*)\}/g, (m, w) => {
    if (!(w in words)) throw new Error(`api/tools.json: unknown placeholder ${m}`);
    return words[w];
  });
}

const shown = (p) => (p.only ?? [SURFACE]).includes(SURFACE);

/** The source of src/generated/tools.ts for the given tools.json text. */
export function render(json) {
  const data = JSON.parse(json);
  const words = data.surfaces[SURFACE];
  const lines = [
    "// Generated from api/tools.json by scripts/gen-tools.mjs (npm run gen): do not edit.",
    "// The agent tools' descriptions and their arguments', as the TypeScript tools show them.",
    "",
    "export const TOOL_TEXTS = {",
  ];
  for (const t of data.tools) {
    if (!t.sdk) continue;
    const details = resolve(t.details ?? "", words);
    const description = resolve(t.summary, words) + (details ? "\n\n" + details : "");
    lines.push(`  ${t.sdk}: {`, `    description: ${JSON.stringify(description)},`, "    parameters: {");
    for (const p of (t.params ?? []).filter(shown)) {
      lines.push(`      ${p.name}: ${JSON.stringify(resolve(p.description, words))},`);
    }
    lines.push("    },", "  },");
  }
  lines.push("} as const;", "");
  return lines.join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const fresh = render(readFileSync(toolsJSON, "utf8"));
  if (process.argv[2] === "--check") {
    const committed = process.argv[3] ?? generated;
    if (readFileSync(committed, "utf8") !== fresh) {
      console.error("src/generated/tools.ts is stale: run `npm run gen` in sdk/typescript and commit it");
      process.exit(1);
    }
    console.log("src/generated/tools.ts matches api/tools.json");
  } else {
    writeFileSync(generated, fresh);
  }
}
