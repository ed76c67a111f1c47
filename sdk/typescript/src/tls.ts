// The plugin's half of go-plugin's automatic mutual TLS: a fresh
// self-signed ECDSA P-256 certificate for "localhost", its own CA, as the
// Go SDK makes. Node can sign but has no certificate builder, so the few
// DER structures of one certificate are written here.

import { generateKeyPairSync, randomBytes, sign } from "node:crypto";

function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  const n = body.length;
  const len = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
  return Buffer.concat([Buffer.from([tag, ...len]), body]);
}

const seq = (...c: Buffer[]) => der(0x30, ...c);

function oid(dotted: string): Buffer {
  const [a = 0, b = 0, ...rest] = dotted.split(".").map(Number);
  const out = [40 * a + b];
  for (const n of rest) {
    const groups = [n & 0x7f];
    for (let v = n >> 7; v; v >>= 7) groups.unshift((v & 0x7f) | 0x80);
    out.push(...groups);
  }
  return der(0x06, Buffer.from(out));
}

// RFC 5280: UTCTime through 2049, GeneralizedTime after.
function time(d: Date): Buffer {
  const s = d.toISOString().replace(/[-:T]/g, "").replace(/\.\d+Z$/, "Z");
  return d.getUTCFullYear() < 2050 ? der(0x17, Buffer.from(s.slice(2))) : der(0x18, Buffer.from(s));
}

function name(): Buffer {
  const rdn = (id: string, value: string) => der(0x31, seq(oid(id), der(0x0c, Buffer.from(value))));
  return seq(rdn("2.5.4.10", "memhost"), rdn("2.5.4.3", "localhost"));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [der(0x01, Buffer.from([0xff]))] : []), der(0x04, value));
}

export interface ServerCertificate {
  certPem: string;
  keyPem: string;
  /** The certificate's DER in base64 without padding, for the handshake line. */
  line: string;
}

export function serverCertificate(now = new Date()): ServerCertificate {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x01; // positive, and no redundant leading zero
  const ecdsaSha256 = seq(oid("1.2.840.10045.4.3.2"));
  const tbs = seq(
    der(0xa0, der(0x02, Buffer.from([2]))), // v3
    der(0x02, serial),
    ecdsaSha256,
    name(),
    seq(time(new Date(now.getTime() - 60_000)), time(new Date(now.getTime() + 30 * 365 * 86_400_000))),
    name(),
    publicKey.export({ type: "spki", format: "der" }),
    der(0xa3, seq(
      extension("2.5.29.15", true, der(0x03, Buffer.from([2, 0x84]))), // digitalSignature, keyCertSign
      extension("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.1"), oid("1.3.6.1.5.5.7.3.2"))),
      extension("2.5.29.19", true, seq(der(0x01, Buffer.from([0xff])))), // CA
      extension("2.5.29.17", false, seq(der(0x82, Buffer.from("localhost")))),
    )),
  );
  const signature = sign("sha256", tbs, { key: privateKey, dsaEncoding: "der" });
  const cert = seq(tbs, ecdsaSha256, der(0x03, Buffer.from([0]), signature));
  const b64 = cert.toString("base64");
  return {
    certPem: "-----BEGIN CERTIFICATE-----\n" + (b64.match(/.{1,64}/g) ?? []).join("\n") + "\n-----END CERTIFICATE-----\n",
    keyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    line: b64.replace(/=+$/, ""),
  };
}
