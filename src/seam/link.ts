// One end of a seam stream, whatever carries it (gRPC/Connect, or a relay channel).
import type { SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";

/** What carries a link: the fast seam on TCP ("tcp") or over TLS ("tls"), gRPC/Connect on
 *  HTTP/2 (h2c "grpc", over TLS "grpcs"), or a relay channel. */
export type SeamTransport = "tcp" | "tls" | "grpc" | "grpcs" | "relay" | "memory";

export interface SeamLink {
  /** what carries it (a link still choosing says what it will fall back to) */
  readonly transport: SeamTransport;
  /** Queues a frame toward the peer; false when the link has ended. */
  send(frame: SeamFrame): boolean;
  /** The peer's frames, in order; ends when the peer ends the stream, throws when it fails. */
  readonly replies: AsyncIterable<SeamFrame>;
  /** Ends the stream after the queued frames. */
  close(): void;
  /** Tears the stream down now. */
  abort(reason: string): void;
}

/** Opens a seam stream to a hop URL: http://host:port or relay+ws://host:port/peer. */
export type SeamDialer = (url: string) => SeamLink;

/** Serves one incoming seam stream: frames in, replies out; resolves when the stream is done. */
export type SeamServe = (
  frames: AsyncIterable<SeamFrame>,
  reply: (frame: SeamFrame) => void,
  /** what carries the stream (telemetry names it) */
  transport?: SeamTransport,
) => Promise<void>;

/** Sees the encoded bytes of every frame a link sends (tests compare transports with it). */
export type FrameTap = (bytes: Uint8Array, frame: SeamFrame) => void;
