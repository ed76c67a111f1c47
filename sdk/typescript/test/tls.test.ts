import assert from "node:assert/strict";
import { X509Certificate, createPrivateKey } from "node:crypto";
import { test } from "node:test";

import { serverCertificate } from "../src/tls.js";

test("the server certificate is a self-signed P-256 CA for localhost, valid now", () => {
  const now = new Date("2049-12-31T23:00:00Z"); // notAfter falls past 2049: GeneralizedTime
  const c = serverCertificate(now);
  const x = new X509Certificate(c.certPem);
  assert.ok(x.verify(x.publicKey), "not signed by its own key");
  assert.ok(x.ca);
  assert.equal(x.subjectAltName, "DNS:localhost");
  assert.equal(x.checkHost("localhost"), "localhost");
  assert.match(x.subject, /CN=localhost/);
  assert.equal(x.issuer, x.subject);
  assert.equal(x.publicKey.asymmetricKeyDetails?.namedCurve, "prime256v1");
  assert.ok(new Date(x.validFrom) < now && now < new Date(x.validTo));
  assert.ok(new Date(x.validTo).getUTCFullYear() >= 2079);
  assert.deepEqual(x.keyUsage.sort(), ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]);
  assert.ok(x.checkPrivateKey(createPrivateKey(c.keyPem)));
  assert.deepEqual(Buffer.from(c.line, "base64"), x.raw);
  assert.ok(!c.line.endsWith("="));
});
