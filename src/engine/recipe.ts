// The recipe fingerprint a shard stamps on its seam frames: which engine build computed
// the hidden states, on which backend. Every host can hash the binary it loaded (a page
// holds only the .wasm bytes), so a tab and a Deno node running one build agree.
import { hexToBytes } from "../bytes/hex.ts";
import { sha256Hex } from "../gguf/manifest.ts";

/**
 * 32 bytes: sha256 of "<sha256 hex of the engine binary>|<backend label>", the label as
 * nodes advertise it ("native-cpu", "native-vulkan", "wasm-cpu", "wasm-webgpu").
 */
export async function engineRecipe(binary: Uint8Array, label: string): Promise<Uint8Array> {
  const line = `${await sha256Hex(binary)}|${label}`;
  return hexToBytes(await sha256Hex(new TextEncoder().encode(line)));
}

/**
 * Whether an engine's batch cost grows with the tokens in it (a CPU's; a GPU's barely moves),
 * by its backend or label: where prompts cut into chunks pay, and cohorts where a node could not
 * time a batch (scheduler/cohort-rule.ts decides from its timings otherwise).
 */
export const costsPerToken = (backendOrLabel: string): boolean => backendOrLabel.endsWith("cpu");

/** What nodes advertise and telemetry shows: "native-cpu", "wasm-cpu", "wasm-webgpu". */
export const engineLabel = (e: { readonly kind: "native" | "wasm"; readonly backend: string }): string =>
  e.kind === "native" ? `native-${e.backend}` : e.backend;
