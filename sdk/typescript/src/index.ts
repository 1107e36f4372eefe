/**
 * withruntime: disposable, isolated Linux sandboxes for AI agents.
 *
 *     import { Sandbox } from "withruntime";
 *     await using sbx = await Sandbox.create({ timeoutSeconds: 600 });
 *     console.log((await sbx.exec("echo hi", { check: true })).stdout);
 *
 * Configuration comes from WITHRUNTIME_API_KEY and WITHRUNTIME_BASE_URL, or
 * from the apiKey and baseUrl options. No runtime dependencies: Node.js 18
 * or later (its fetch and streams).
 */

export * from "./errors.js";
