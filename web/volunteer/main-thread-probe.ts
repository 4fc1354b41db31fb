// How long this page's main thread was blocked: the one that carries the tab's seams and
// draws the page. Read by tests from the page's state (a figure, not a check): the longest
// task Chromium reports (PerformanceObserver 'longtask', tasks of 50 ms and more) and the
// longest lateness of a 10 ms timer (which also sees shorter blocks).

export interface MainThreadFigures {
  /** longest long task, ms (0: none of 50 ms or more) */
  longestTaskMs: number;
  longTasks: number;
  /** longest a 10 ms timer fired late, ms */
  longestTimerLateMs: number;
  /** since when, ms of the page's clock */
  sinceMs: number;
}

const TICK_MS = 10;

export function probeMainThread(): { figures: MainThreadFigures; reset(): void } {
  const figures: MainThreadFigures = { longestTaskMs: 0, longTasks: 0, longestTimerLateMs: 0, sinceMs: 0 };
  if (PerformanceObserver.supportedEntryTypes?.includes("longtask")) {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        if (e.startTime < figures.sinceMs) continue;
        figures.longTasks++;
        figures.longestTaskMs = Math.max(figures.longestTaskMs, Math.round(e.duration));
      }
    }).observe({ type: "longtask" });
  }
  let due = performance.now() + TICK_MS;
  const tick = () => {
    const now = performance.now();
    figures.longestTimerLateMs = Math.max(figures.longestTimerLateMs, Math.round(now - due));
    due = now + TICK_MS;
    setTimeout(tick, TICK_MS);
  };
  setTimeout(tick, TICK_MS);
  return {
    figures,
    reset() {
      Object.assign(figures, { longestTaskMs: 0, longTasks: 0, longestTimerLateMs: 0 });
      figures.sinceMs = performance.now();
      due = figures.sinceMs + TICK_MS;
    },
  };
}
