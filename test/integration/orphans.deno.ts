// A parent that starts a relay as a service process (as `strata up` does), prints the relay's
// pid, and waits to be killed. orphans.test.ts kills it with SIGKILL and watches the relay.
import { ServiceProcess } from "../../server/process/service-process.ts";

const relay = await ServiceProcess.start("relay", [
  "relay",
  "--listen",
  "127.0.0.1:0",
  "--relay-secret",
  "orphans-test",
]);
console.log(JSON.stringify({ pid: relay.child.pid }));
await new Promise(() => {});
