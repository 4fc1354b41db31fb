// Where a tab's seams arrive: its channel on the relay, the only way to reach it.
import type { SeamListener } from "../../src/node/runtime.ts";
import { relayListener } from "../../src/relay/relay-seams.ts";
import type { TabDialer } from "./dialer.ts";

export function seamListeners(dialer: TabDialer): SeamListener[] {
  return [relayListener(dialer.relay.peer, dialer.relay.url)];
}
