// A link that carries one request: its first reply, as the answer or the refusal it says.
import type { SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import { SeamError, type SeamErrorCode } from "./errors.ts";
import type { SeamLink } from "./link.ts";

/** The peer's first reply; throws its refusal, or when none comes within `timeoutMs`. */
export async function firstAnswer(link: SeamLink, timeoutMs: number, peer: string): Promise<SeamFrame> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const late = new Promise<never>((_, reject) =>
      timer = setTimeout(
        () => reject(new SeamError("deadline", `no answer from ${peer} within ${timeoutMs} ms`)),
        timeoutMs,
      )
    );
    const r = await Promise.race([link.replies[Symbol.asyncIterator]().next(), late]);
    if (r.done) throw new SeamError("unavailable", `${peer} ended the stream without an answer`);
    if (r.value.status) throw new SeamError(r.value.status.code as SeamErrorCode, r.value.status.message);
    return r.value;
  } finally {
    clearTimeout(timer);
  }
}
