// Progress for long work (builds, downloads, loads): a bar on a terminal, a few
// plain lines otherwise, so CI logs stay short.
import cliProgress from "cli-progress";

export interface Progress {
  update(done: number, total?: number): void;
  finish(note?: string): void;
}

export function progress(label: string, total: number): Progress {
  if (Deno.stderr.isTerminal()) {
    const bar = new cliProgress.SingleBar(
      { format: `${label} [{bar}] {percentage}% {value}/{total}`, stream: process.stderr, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, 0);
    return {
      update(done, t) {
        if (t !== undefined) bar.setTotal(t);
        bar.update(done);
      },
      finish(note) {
        bar.stop();
        if (note) console.error(`${label}: ${note}`);
      },
    };
  }
  let lastTenth = -1;
  let max = total;
  return {
    update(done, t) {
      if (t !== undefined && t !== max) {
        max = t;
        lastTenth = -1;
      }
      const tenth = max > 0 ? Math.floor((done / max) * 10) : 0;
      if (tenth > lastTenth) {
        lastTenth = tenth;
        console.error(`${label}: ${Math.min(100, tenth * 10)}%`);
      }
    },
    finish(note) {
      console.error(`${label}: done${note ? ` (${note})` : ""}`);
    },
  };
}
