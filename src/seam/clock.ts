// Wall-clock milliseconds with sub-millisecond precision: stamps that time seam crossings
// between processes on one machine (telemetry's received/sent times).
export const unixMs = (): number => performance.timeOrigin + performance.now();
