// A service process another Strata process started (ServiceProcess) ends when that one is gone.
// A `strata up` killed outright (SIGKILL, a crash, an abort) cannot stop its children, and a
// tracker or relay left behind keeps its port, and a node its memory, for good.
import { log } from "../log/log.ts";

/** Set by ServiceProcess in its child's environment: the parent's pid. */
export const PARENT_ENV = "STRATA_PARENT_PID";

/** How often a child looks whether its parent is still there. */
const CHECK_MS = 1000;

/** In a child started by ServiceProcess: exit once the parent is gone (the child is re-parented). */
export function watchParent(): void {
  const parent = Number(Deno.env.get(PARENT_ENV));
  // processes this one starts by other means are not watched for it
  Deno.env.delete(PARENT_ENV);
  if (!Number.isInteger(parent) || parent <= 0) return;
  const timer = setInterval(() => {
    if (Deno.ppid === parent) return;
    log.warn("the process that started this one is gone: exiting", { parent });
    Deno.exit(1);
  }, CHECK_MS);
  Deno.unrefTimer(timer);
}
