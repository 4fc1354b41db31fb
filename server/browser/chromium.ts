// Headless Chromium (Debian's package) through playwright-core: a fresh profile each
// launch, WebGPU allowed (an adapter appears only with the unsafe flag; SwiftShader here).
import { CHROMIUM_JS_FLAGS } from "../process/v8-flags.ts";
import { chromium } from "playwright-core";
import { existsSync } from "node:fs";
import { log } from "../log/log.ts";
import { ensureDebianPackages } from "../toolchain/apt.ts";
import { runCommand } from "../process/run.ts";

type Context = Awaited<ReturnType<typeof chromium.launchPersistentContext>>;
export type BrowserPage = Awaited<ReturnType<Context["newPage"]>>;

export const CHROMIUM = Deno.env.get("STRATA_CHROMIUM") ?? "/usr/bin/chromium";

export function hasChromium(): boolean {
  return existsSync(CHROMIUM);
}

export class Chromium {
  private constructor(private readonly context: Context, private readonly profile: string) {}

  /** `args`: more command-line switches (e.g. --host-resolver-rules for a name that is no loopback);
   *  `executable`: a wrapper that starts Chromium elsewhere (a test host's namespace, its own HOME) */
  static async launch(
    args: string[] = [],
    o: {
      executable?: string;
      /** a CA certificate (PEM file) the browser trusts, as a person adds one to its store */
      trustCa?: string;
    } = {},
  ): Promise<Chromium> {
    if (!o.executable && !hasChromium()) {
      throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (or set STRATA_CHROMIUM)`);
    }
    const profile = await Deno.makeTempDir({ prefix: "strata-chromium-" });
    const env = o.trustCa ? { HOME: await trustingHome(profile, o.trustCa) } : undefined;
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: o.executable ?? CHROMIUM,
      ...(env ? { env: { ...Deno.env.toObject(), ...env } } : {}),
      headless: true,
      args: [
        "--no-sandbox",
        "--enable-unsafe-webgpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
        CHROMIUM_JS_FLAGS,
        ...args,
      ],
    });
    return new Chromium(context, profile);
  }

  async page(url: string): Promise<BrowserPage> {
    const page = await this.context.newPage();
    page.on("console", (m) => {
      if (m.type() === "warning" || m.type() === "error") log.info("browser.console", { text: m.text() });
    });
    page.on("pageerror", (e) => log.warn("browser.error", { message: e.message }));
    await page.goto(url);
    return page;
  }

  async close(): Promise<void> {
    await this.context.close().catch(() => {});
    await Deno.remove(this.profile, { recursive: true }).catch(() => {});
  }
}

/**
 * A HOME whose NSS store (where Chromium on Linux looks for certificates a user added) trusts
 * `caFile` to issue server certificates: no certificate error is ignored, the CA is trusted.
 */
async function trustingHome(profile: string, caFile: string): Promise<string> {
  if (!await ensureDebianPackages(["libnss3-tools"])) {
    throw new Error("trusting a CA in Chromium needs certutil (apt-get install libnss3-tools)");
  }
  const home = `${profile}/home`;
  const db = `sql:${home}/.pki/nssdb`;
  await Deno.mkdir(`${home}/.pki/nssdb`, { recursive: true });
  await runCommand("certutil", ["-d", db, "-N", "--empty-password"]);
  await runCommand("certutil", ["-d", db, "-A", "-t", "C,,", "-n", "strata-network", "-i", caFile]);
  return home;
}
