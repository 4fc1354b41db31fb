// The tracker's Certify call: a node (holding the node token, checked before this runs) hands
// in its TLS key's public half and the hosts its URLs name, and gets a certificate from the
// network's CA. Peers that pin the CA then know the node was let in by this tracker.
import { create } from "@bufbuild/protobuf";
import {
  type CertifyRequest,
  type CertifyResponse,
  CertifyResponseSchema,
} from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { TrackerError } from "../../src/tracker/errors.ts";
import { issueCert, type NetworkCa } from "../../node-apis/tls/certs.ts";

const MAX_HOSTS = 16;
const MAX_KEY_BYTES = 1024;
const MAX_NAME = 128;

export type Certify = (req: CertifyRequest) => Promise<CertifyResponse>;

/** Certify with the CA; without one, every call is refused. */
export function certifier(ca: NetworkCa | undefined): Certify {
  return async (req) => {
    if (!ca) {
      throw new TrackerError(
        "failed_precondition",
        "this tracker holds no CA (start it with --ca and --ca-key)",
      );
    }
    if (req.node.length === 0 || req.node.length > MAX_NAME) {
      throw new TrackerError("invalid_argument", `a node name is 1 to ${MAX_NAME} characters`);
    }
    if (req.hosts.length === 0 || req.hosts.length > MAX_HOSTS) {
      throw new TrackerError("invalid_argument", `name 1 to ${MAX_HOSTS} hosts`);
    }
    if (req.publicKey.length === 0 || req.publicKey.length > MAX_KEY_BYTES) {
      throw new TrackerError("invalid_argument", `the public key is 1 to ${MAX_KEY_BYTES} bytes (DER)`);
    }
    let certPem: string;
    try {
      certPem = await issueCert(ca, req.publicKey, req.node, req.hosts);
    } catch (e) {
      // a key that is not a P-256 SubjectPublicKeyInfo, or a host that is no host name
      throw new TrackerError("invalid_argument", `cannot certify: ${e instanceof Error ? e.message : e}`);
    }
    return create(CertifyResponseSchema, { certPem, caPem: ca.cert });
  };
}
